/*
 * loop_check.h - LOOP_CHECK, a check for the loops that make it thousands
 * of times: Check is called only when it fails.
 *
 * Every ck_assert that passes is a message (_mark_point) the runner writes
 * and, after the test, reads back in time quadratic in their number: its
 * punpack moves the rest of the buffer down after each message. A loop of
 * 100,000 checks cost check_hlc about 10 s of CPU under ASan (CK_FORK=no),
 * for the same checks. Header-only: each runner is one file.
 */
#ifndef TESTS_UNIT_LOOP_CHECK_H
#define TESTS_UNIT_LOOP_CHECK_H

#include <check.h>

/* ck_abort_msg(fmt, ...) if cond is false; nothing to Check otherwise. */
#define LOOP_CHECK(cond, ...)          \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

#endif
