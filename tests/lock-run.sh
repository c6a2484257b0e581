#!/bin/sh
# lock-run.sh shared|exclusive COMMAND [ARG...] - run COMMAND holding the
# test lock named by $RINGKV_TEST_LOCK, shared or exclusive; without that
# variable, just run it.
#
# scripts/run-tests.sh runs the two build trees' tests at the same time
# (the second in a network namespace of its own, so both use the same
# 127.0.0.x addresses). Within a tree ctest keeps a test marked serial
# (RUN_SERIAL) apart from the others; across the trees this lock does: a
# serial test takes it exclusive, every other test shared, so a test that
# measures memory, latency or time never runs beside the other tree's.
mode=$1
shift
if [ -z "${RINGKV_TEST_LOCK:-}" ]; then
    exec "$@"
fi
case "$mode" in
shared) exec flock --shared "$RINGKV_TEST_LOCK" "$@" ;;
exclusive) exec flock --exclusive "$RINGKV_TEST_LOCK" "$@" ;;
*)
    echo "lock-run.sh: mode must be shared or exclusive, not '$mode'" >&2
    exit 2
    ;;
esac
