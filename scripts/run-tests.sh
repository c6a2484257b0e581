#!/usr/bin/env bash
# run-tests.sh BUILD_DIR [BUILD_DIR2] - runs ctest in each build folder
# given, prints every Check runner's summary line, and ends with each
# ctest's own summary. Exits non-zero if any test failed.
#
# Four tests at once per tree by default (RK_TEST_JOBS): the cluster tests
# mostly wait on gossip rounds and timeouts. tests/CMakeLists.txt says
# which may run next to which ("alongside others", or one timing test at a
# time).
#
# Two trees run at the same time, each in a network namespace of its own
# (unshare -n, with its own loopback), so their cluster tests use the same
# 127.0.0.x addresses without meeting each other or anything else on the
# host (a demo cluster, another checkout's tests). The compose tests
# (label docker) need the host's network: they run outside the namespaces,
# the first tree's and then the second's (never both at once: they would
# share container names), while the rest goes on, each from a folder of its
# own (DIR/compose-tests: two ctest runs in one folder would write over each
# other's logs). One tree, or RK_TEST_TREES_AT_ONCE=0, runs the trees one
# after the other, each still in a namespace of its own (and its compose
# tests after it, outside); a machine where unshare is refused runs them
# one after the other on the host's network (tests/cluster/test_history.py
# then fails: it adds iptables rules only in a namespace of its own).
# RK_CTEST_ARGS adds ctest arguments (e.g. "-R cluster.test_repair" to run
# some tests only).
#
# --build (first argument): build each tree first (cmake --build, with
# RK_BUILD_JOBS jobs, default nproc), and start each tree's tests as soon
# as it is built: `make test` builds the ASan tree, starts its tests (the
# longer run) and builds the plain tree meanwhile, whose compiler has the
# cores the waiting cluster tests leave idle. A build that fails stops
# the run (its tests do not start; those started are stopped).
set -uo pipefail
jobs=${RK_TEST_JOBS:-4}
# the slots the load and timing tests share (tests/CMakeLists.txt)
resources="$(cd "$(dirname "$0")/.." && pwd)/tests/ctest-resources.json"
status=0
build=0
if [ "${1:-}" = --build ]; then
    build=1
    shift
fi
build_jobs=${RK_BUILD_JOBS:-$(nproc)}

# cmake --build $1 (with --build); on failure, stop everything started
build_tree() {
    [ $build -eq 1 ] || return 0
    echo "== building $1"
    if ! cmake --build "$1" -j "$build_jobs"; then
        echo "== the build of $1 failed: no test of it runs" >&2
        local p
        for p in $(jobs -p); do kill -- -"$p" 2>/dev/null || kill "$p"; done
        wait
        exit 1
    fi
}

# ctest in $1 with the rest as extra arguments, output to $1/ctest.out
run_ctest() {
    local dir=$1
    shift
    # shellcheck disable=SC2086 # RK_CTEST_ARGS is split on purpose
    (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900 \
        --resource-spec-file "$resources" ${RK_CTEST_ARGS:-} "$@") \
        >"$dir/ctest.out" 2>&1
}

in_netns() {
    unshare --net sh -c 'ip link set lo up && exec "$@"' sh "$@"
}

netns=0
in_netns true 2>/dev/null && netns=1
parallel=0
if [ $# -eq 2 ] && [ "${RK_TEST_TREES_AT_ONCE:-1}" != 0 ] && [ $netns -eq 1 ]
then
    parallel=1
fi

# run_ctest in $1, in a network namespace of its own: all but the compose
# tests
run_ctest_netns() {
    in_netns bash -c "$(declare -f run_ctest); jobs=$jobs; \
        resources='$resources'; \
        RK_CTEST_ARGS='${RK_CTEST_ARGS:-}'; run_ctest \"\$1\" -LE docker" \
        sh "$1"
}

report() { # $1: dir, $2: what ran, $3: ctest's exit code
    echo "== ctest in $1$2"
    cat "$1/ctest.out"
    [ "$3" -eq 0 ] || status=1
    echo "== Check summaries in $1"
    grep -hE '^[0-9]+%: Checks: [0-9]+' \
        "$1/Testing/Temporary/LastTest.log" || echo "(no Check runner output)"
}

# report of the tree $1, whose ctest ran in a namespace and exited $2, and
# of its compose tests (if it has any), which exited $3
report_tree() {
    report "$1" " (all but the compose tests)" "$2"
    summaries+=("$1: $(grep -E 'tests passed, [0-9]+ tests failed' "$1/ctest.out")")
    if [ -f "$1/compose-tests/ctest.out" ]; then
        report "$1/compose-tests" " (the compose tests of $1)" "$3"
        summaries+=("$1 (compose): $(grep -E 'tests passed, [0-9]+ tests failed' "$1/compose-tests/ctest.out")")
    fi
}

# DIR's compose tests from DIR/compose-tests (see above); 0 if it has none
compose_ctest() {
    local d="$1/compose-tests"
    rm -rf "$d"
    mkdir -p "$d"
    echo "include(\"$(cd "$1" && pwd)/tests/CTestTestfile.cmake\")" \
        >"$d/CTestTestfile.cmake"
    # asked in $d: `ctest -N` in $1 would write over the log of the run
    if ! (cd "$d" && ctest -N -L docker | grep -q 'Total Tests: [1-9]'); then
        rm -rf "$d"
        return 0
    fi
    run_ctest "$d" -L docker
}

summaries=()
if [ $parallel -eq 1 ]; then
    a=$1 b=$2
    echo "== ctest in $a and in $b at the same time (each in a network namespace)"
    t0=$(date +%s)
    pids=()
    set -m # each tree's tests in a process group of their own (build_tree)
    for dir in "$a" "$b"; do
        build_tree "$dir"
        (
            run_ctest_netns "$dir"
            rc=$?
            echo "== $dir done in $(($(date +%s) - t0)) s"
            exit $rc
        ) &
        pids+=($!)
    done
    set +m
    rcs=()
    for dir in "$a" "$b"; do
        compose_ctest "$dir"
        rcs+=($?)
    done
    echo "== compose tests done in $(($(date +%s) - t0)) s"
    ra=0 rb=0
    wait "${pids[0]}" || ra=$?
    wait "${pids[1]}" || rb=$?
    echo "== both trees done in $(($(date +%s) - t0)) s"
    report_tree "$a" $ra "${rcs[0]}"
    report_tree "$b" $rb "${rcs[1]}"
elif [ $netns -eq 1 ]; then
    for dir in "$@"; do
        build_tree "$dir"
        echo "== ctest in $dir (in a network namespace)"
        run_ctest_netns "$dir"
        r=$?
        compose_ctest "$dir"
        report_tree "$dir" $r $?
    done
else
    for dir in "$@"; do
        build_tree "$dir"
        run_ctest "$dir"
        report "$dir" "" $?
        summaries+=("$dir: $(grep -E 'tests passed, [0-9]+ tests failed' "$dir/ctest.out")")
    done
fi
echo "== summary"
for s in "${summaries[@]}"; do echo "$s"; done
exit $status
