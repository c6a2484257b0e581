/*
 * svg.h - minimal SVG charts for ringkv-sim.
 */
#ifndef TOOLS_SIM_SVG_H
#define TOOLS_SIM_SVG_H

#include <stddef.h>

struct svg_series {
    const char *name;
    const double *x; /* line charts only */
    const double *y;
    size_t n;
};

struct svg_chart {
    const char *title, *xlabel, *ylabel;
    const struct svg_series *series;
    size_t nseries;
    int bars; /* grouped bars over cats[] instead of lines */
    const char *const *cats;
    size_t ncats;
    int logx;     /* lines: log2 x axis */
    int ymin_set; /* start the y axis at ymin */
    double ymin;
    int hline_set; /* dashed reference line at hline */
    double hline;
};

/* Write the chart to `path`. 0 or -1 (errno set). */
int svg_write(const char *path, const struct svg_chart *c);

#endif
