/*
 * svg.c - the few chart shapes ringkv-sim draws: lines over a (log) x axis
 * and grouped bars. Plain SVG 1.1, no scripts, no external fonts.
 */
#include "tools/sim/svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const svg__colors[] = {"#1f77b4", "#d62728", "#2ca02c",
                                          "#ff7f0e", "#9467bd", "#8c564b",
                                          "#e377c2", "#7f7f7f"};
#define SVG__NCOLORS (sizeof(svg__colors) / sizeof(svg__colors[0]))

#define W  720.0
#define H  420.0
#define ML 70.0
#define MR 200.0
#define MT 40.0
#define MB 60.0

static void svg__escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

static double svg__nice(double v)
{
    double e = pow(10, floor(log10(v)));
    double m = v / e;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
}

static void svg__frame(FILE *f, const struct svg_chart *c)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H);
    fprintf(f,
            "<text x=\"%.0f\" y=\"22\" font-size=\"15\" "
            "font-weight=\"bold\">",
            ML);
    svg__escape(f, c->title);
    fprintf(f, "</text>\n<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">",
            ML + (W - ML - MR) / 2, H - 15);
    svg__escape(f, c->xlabel);
    fprintf(f,
            "</text>\n<text transform=\"translate(18,%.0f) rotate(-90)\" "
            "text-anchor=\"middle\">",
            MT + (H - MT - MB) / 2);
    svg__escape(f, c->ylabel);
    fputs("</text>\n", f);
}

static void svg__legend(FILE *f, const struct svg_chart *c)
{
    for (size_t s = 0; s < c->nseries; s++) {
        double y = MT + 10 + 20.0 * (double)s;
        fprintf(f,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"4\" "
                "fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">",
                W - MR + 15, y - 4, svg__colors[s % SVG__NCOLORS], W - MR + 35,
                y + 1);
        svg__escape(f, c->series[s].name);
        fputs("</text>\n", f);
    }
}

static void svg__yaxis(FILE *f, double ymin, double ymax)
{
    double step = svg__nice((ymax - ymin) / 6);
    for (double v = ceil(ymin / step) * step; v <= ymax + 1e-12; v += step) {
        double y = H - MB - (v - ymin) / (ymax - ymin) * (H - MT - MB);
        fprintf(f,
                "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#ddd\"/><text x=\"%.0f\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n",
                ML, W - MR, y, y, ML - 6, y + 4, v);
    }
    fprintf(f,
            "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" "
            "stroke=\"black\"/><line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" "
            "y2=\"%.0f\" stroke=\"black\"/>\n",
            ML, ML, MT, H - MB, ML, W - MR, H - MB, H - MB);
}

static void svg__range(const struct svg_chart *c, double *lo, double *hi)
{
    *lo = c->ymin_set ? c->ymin : INFINITY;
    *hi = -INFINITY;
    for (size_t s = 0; s < c->nseries; s++)
        for (size_t i = 0; i < c->series[s].n; i++) {
            double v = c->series[s].y[i];
            if (!c->ymin_set && v < *lo)
                *lo = v;
            if (v > *hi)
                *hi = v;
        }
    if (!(*hi > *lo))
        *hi = *lo + 1;
    double pad = (*hi - *lo) * 0.05;
    *hi += pad;
    if (!c->ymin_set)
        *lo = *lo - pad < 0 && *lo >= 0 ? 0 : *lo - pad;
}

int svg_write(const char *path, const struct svg_chart *c)
{
    FILE *f = fopen(path, "w");
    double ymin, ymax;
    if (f == NULL)
        return -1;
    svg__frame(f, c);
    svg__range(c, &ymin, &ymax);
    svg__yaxis(f, ymin, ymax);
    double pw = W - ML - MR, ph = H - MT - MB;
#define YPOS(v) (H - MB - ((v)-ymin) / (ymax - ymin) * ph)

    if (c->bars) {
        size_t ng = c->ncats, ns = c->nseries;
        double gw = pw / (double)ng, bw = gw * 0.8 / (double)ns;
        for (size_t g = 0; g < ng; g++) {
            double gx = ML + gw * (double)g;
            if (ng <= 24 || g % (ng / 12 + 1) == 0) {
                fprintf(f,
                        "<text x=\"%.1f\" y=\"%.0f\" "
                        "text-anchor=\"middle\">",
                        gx + gw / 2, H - MB + 16);
                svg__escape(f, c->cats[g]);
                fputs("</text>\n", f);
            }
            for (size_t s = 0; s < ns; s++) {
                if (g >= c->series[s].n)
                    continue;
                double v = c->series[s].y[g];
                double y0 = YPOS(ymin > 0 ? ymin : 0), y1 = YPOS(v);
                fprintf(f,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                        "height=\"%.1f\" fill=\"%s\"/>\n",
                        gx + gw * 0.1 + bw * (double)s, y1, bw, y0 - y1,
                        svg__colors[s % SVG__NCOLORS]);
            }
        }
    } else {
        double xmin = INFINITY, xmax = -INFINITY;
        for (size_t s = 0; s < c->nseries; s++)
            for (size_t i = 0; i < c->series[s].n; i++) {
                double x =
                    c->logx ? log2(c->series[s].x[i]) : c->series[s].x[i];
                xmin = x < xmin ? x : xmin;
                xmax = x > xmax ? x : xmax;
            }
        if (!(xmax > xmin))
            xmax = xmin + 1;
#define XPOS(v) (ML + ((c->logx ? log2(v) : (v)) - xmin) / (xmax - xmin) * pw)
        /* x ticks at the first series' points */
        if (c->nseries > 0)
            for (size_t i = 0; i < c->series[0].n; i++)
                fprintf(f,
                        "<text x=\"%.1f\" y=\"%.0f\" "
                        "text-anchor=\"middle\">%g</text>\n",
                        XPOS(c->series[0].x[i]), H - MB + 16,
                        c->series[0].x[i]);
        for (size_t s = 0; s < c->nseries; s++) {
            const struct svg_series *se = &c->series[s];
            const char *col = svg__colors[s % SVG__NCOLORS];
            fputs("<polyline fill=\"none\" stroke-width=\"2\" ", f);
            fprintf(f, "stroke=\"%s\" points=\"", col);
            for (size_t i = 0; i < se->n; i++)
                fprintf(f, "%.1f,%.1f ", XPOS(se->x[i]), YPOS(se->y[i]));
            fputs("\"/>\n", f);
            for (size_t i = 0; i < se->n; i++)
                fprintf(f,
                        "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                        "fill=\"%s\"/>\n",
                        XPOS(se->x[i]), YPOS(se->y[i]), col);
        }
    }
    if (c->hline_set) {
        double y = YPOS(c->hline);
        fprintf(f,
                "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#555\" stroke-dasharray=\"5,4\"/>\n",
                ML, W - MR, y, y);
    }
    svg__legend(f, c);
    fputs("</svg>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}
