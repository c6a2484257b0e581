#!/bin/sh
# lock-run.sh shared|exclusive COMMAND [ARG...] - run COMMAND holding the
# test lock named by $RINGKV_TEST_LOCK, shared or exclusive; without that
# variable, just run it.
#
# scripts/run-tests.sh runs the two build trees' tests at the same time
# (the second in a network namespace of its own, so both use the same
# 127.0.0.x addresses). Within a tree ctest keeps a serial test (RUN_SERIAL)
# apart from the others; across the trees this lock keeps a test marked
# "# ctest: alone" (test_gossip: a dozen nodes) apart from everything: it
# takes the lock exclusive, every other test shared (tests/CMakeLists.txt).
#
# A turnstile ($RINGKV_TEST_LOCK.turn, taken and let go before the lock)
# makes the lock fair: once an exclusive taker waits, no new shared one
# gets in before it, so the other tree's stream of short tests cannot keep
# it waiting for ever (flock alone lets shared takers starve it).
mode=$1
shift
if [ -z "${RINGKV_TEST_LOCK:-}" ]; then
    exec "$@"
fi
case "$mode" in
shared) how=--shared ;;
exclusive) how=--exclusive ;;
*)
    echo "lock-run.sh: mode must be shared or exclusive, not '$mode'" >&2
    exit 2
    ;;
esac
exec 8>"$RINGKV_TEST_LOCK.turn" 9>"$RINGKV_TEST_LOCK"
flock --exclusive 8
flock $how 9
flock --unlock 8
exec 8>&-
# the command holds fd 9, and with it the lock, until it exits
exec "$@"
