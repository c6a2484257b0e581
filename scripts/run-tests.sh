#!/usr/bin/env bash
# run-tests.sh BUILD_DIR [BUILD_DIR2] - runs ctest in each build folder
# given, prints every Check runner's summary line, and ends with each
# ctest's own summary. Exits non-zero if any test failed.
#
# Three tests at once per tree by default (RK_TEST_JOBS): unit tests, and
# the cluster tests marked to run alongside others (tests/CMakeLists.txt);
# the other cluster tests run one at a time whatever the count.
#
# Two trees run at the same time: the second in a network namespace of its
# own (unshare -n, with its own loopback), so its cluster tests use the same
# 127.0.0.x addresses as the first tree's without meeting them. A lock
# (tests/lock-run.sh) keeps the tests marked "# ctest: alone" (they load
# the machine) apart from everything the other tree runs. The compose tests (label docker) need the host's
# network, so the second tree runs them after, outside the namespace.
# RK_TEST_TREES_AT_ONCE=0, or a machine where unshare is refused, runs the
# trees one after the other as before. RK_CTEST_ARGS adds ctest arguments
# (e.g. "-R cluster.test_repair" to run some tests only).
set -uo pipefail
jobs=${RK_TEST_JOBS:-3}
status=0
lock=$(mktemp /tmp/ringkv-test-lock.XXXXXX)
export RINGKV_TEST_LOCK="$lock"
trap 'rm -f "$lock" "$lock.turn"' EXIT

# ctest in $1 with the rest as extra arguments, output to $1/ctest.out
run_ctest() {
    local dir=$1
    shift
    # shellcheck disable=SC2086 # RK_CTEST_ARGS is split on purpose
    (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900 \
        ${RK_CTEST_ARGS:-} "$@") \
        >"$dir/ctest.out" 2>&1
}

in_netns() {
    unshare --net sh -c 'ip link set lo up && exec "$@"' sh "$@"
}

parallel=0
if [ $# -eq 2 ] && [ "${RK_TEST_TREES_AT_ONCE:-1}" != 0 ] &&
    in_netns true 2>/dev/null; then
    parallel=1
fi

report() { # $1: dir, $2: what ran, $3: ctest's exit code
    echo "== ctest in $1$2"
    cat "$1/ctest.out"
    [ "$3" -eq 0 ] || status=1
    echo "== Check summaries in $1"
    grep -hE '^[0-9]+%: Checks: [0-9]+' \
        "$1/Testing/Temporary/LastTest.log" || echo "(no Check runner output)"
}

summaries=()
if [ $parallel -eq 1 ]; then
    a=$1 b=$2
    echo "== ctest in $a, and in $b at the same time (in a network namespace)"
    t0=$(date +%s)
    run_ctest "$a" &
    pa=$!
    in_netns bash -c "$(declare -f run_ctest); jobs=$jobs; \
        RK_CTEST_ARGS='${RK_CTEST_ARGS:-}'; run_ctest \"\$1\" -LE docker" \
        sh "$b" &
    pb=$!
    wait $pa
    ra=$?
    wait $pb
    rb=$?
    echo "== both trees done in $(($(date +%s) - t0)) s"
    report "$a" "" $ra
    summaries+=("$a: $(grep -E 'tests passed, [0-9]+ tests failed' "$a/ctest.out")")
    report "$b" " (all but the compose tests)" $rb
    summaries+=("$b: $(grep -E 'tests passed, [0-9]+ tests failed' "$b/ctest.out")")
    if (cd "$b" && ctest -N -L docker | grep -q 'Total Tests: [1-9]'); then
        cp "$b/ctest.out" "$b/ctest-netns.out"
        cp "$b/Testing/Temporary/LastTest.log" "$b/LastTest-netns.log"
        run_ctest "$b" -L docker
        report "$b" " (the compose tests)" $?
        summaries+=("$b (compose): $(grep -E 'tests passed, [0-9]+ tests failed' "$b/ctest.out")")
    fi
else
    for dir in "$@"; do
        run_ctest "$dir"
        report "$dir" "" $?
        summaries+=("$dir: $(grep -E 'tests passed, [0-9]+ tests failed' "$dir/ctest.out")")
    done
fi
echo "== summary"
for s in "${summaries[@]}"; do echo "$s"; done
exit $status
