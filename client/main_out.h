/*
 * main_out.h - what `ringkv` prints (main_out.c): JSON values and the STATUS
 * output. Not part of libringkv: only the CLI (client/main.c) uses it.
 */
#ifndef RINGKV_MAIN_OUT_H
#define RINGKV_MAIN_OUT_H

#include <stdio.h>

#include "common/rk.h"
#include "wire/client_msg.h"

/* A JSON string of s. */
void cli_json_slice(FILE *f, struct rk_slice s);
void cli_json_cstr(FILE *f, const char *s);
/* "name":"text" when s is UTF-8, else "name_hex":"..." (docs/cli.md). */
void cli_json_bytes_member(FILE *f, const char *name, struct rk_slice s);

/* The ring's epoch and fingerprint: a line, or the head of a JSON object
 * (left open for the caller's members). */
void cli_print_ring_line(const struct wire_cresp *r);
void cli_json_ring_head(const struct wire_cresp *r);

/* STATUS: the table per data centre and the lines under it, or one JSON
 * object (docs/cli.md). */
void cli_status_text(const struct wire_cresp *r);
void cli_status_json(const struct wire_cresp *r);

#endif
