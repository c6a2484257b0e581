/*
 * unmarked_asserts.h - forced into every unit runner of the ASan tree
 * (-include, tests/CMakeLists.txt): a ck_assert that passes costs a
 * comparison and nothing more.
 *
 * Check's ck_assert_msg (under every ck_assert_*) records each check that
 * passes as a "last checkpoint" message (_mark_point), and after each test
 * the runner reads them back in time quadratic in their number: its
 * punpack moves the rest of its buffer down after each message, with
 * ASan's byte-by-byte memmove. That was a quarter to a half of the CPU of
 * most runners there (check_ring, check_coord, check_wire_*), 10 s of
 * check_hlc's. The checkpoint only serves to name where a forked test
 * crashed; the ASan tree runs every case in the runner's own process
 * (CK_FORK=no), where a crash ends the runner with ASan's own report. A
 * failed check is reported as before. The plain tree forks and keeps
 * Check's own macro.
 */
#ifndef TESTS_UNIT_UNMARKED_ASSERTS_H
#define TESTS_UNIT_UNMARKED_ASSERTS_H

#include <check.h>

#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                 \
    ((expr)                                      \
         ? (void)0                               \
         : _ck_assert_failed(__FILE__, __LINE__, \
                             "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif
