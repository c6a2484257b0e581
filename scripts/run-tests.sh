#!/usr/bin/env bash
# Runs ctest in each build folder given, prints every Check runner's summary
# line, and ends with ctest's own summary. Exits non-zero if any test failed.
# Four tests at once by default (RK_TEST_JOBS): unit tests, and the
# cluster tests marked to run alongside others (tests/CMakeLists.txt); the
# other cluster tests run one at a time whatever the count.
set -uo pipefail
status=0
summaries=()
for dir in "$@"; do
    echo "== ctest in $dir"
    (cd "$dir" && ctest --output-on-failure -j "${RK_TEST_JOBS:-4}" \
        --timeout 900) | tee "$dir/ctest.out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    echo "== Check summaries in $dir"
    grep -hE '^[0-9]+%: Checks: [0-9]+' "$dir/Testing/Temporary/LastTest.log" ||
        echo "(no Check runner output)"
    summaries+=("$dir: $(grep -E 'tests passed, [0-9]+ tests failed' "$dir/ctest.out")")
done
echo "== summary"
for s in "${summaries[@]}"; do echo "$s"; done
exit $status
