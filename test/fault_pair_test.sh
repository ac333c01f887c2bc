#!/usr/bin/env bash
# Two fault tests side by side, one job under recursive doubling and one under the ring, so
# that each job's 4 ranks slow the other's as a busy host does: a fault whose outcome
# depends on where a transfer stands when it lands (a rank killed while its sends are on
# their way) is met in more of its states than by one job alone. Each job runs every
# MODE RR_TEST_REPEAT times (default 4); the test fails if either job fails.
# Usage: fault_pair_test.sh FAULT_CHECK MODE...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
export RR_TEST_REPEAT=${RR_TEST_REPEAT:-4}
RR_ALGO=rd "$here/fault_test.sh" "$@" >"$dir/rd" 2>&1 &
rd=$!
RR_ALGO=ring "$here/fault_test.sh" "$@" >"$dir/ring" 2>&1 &
ring=$!
failed=0
wait $rd || failed=1
wait $ring || failed=1
# The killed victims' "Killed" lines from bash are noise; the rest is each job's report.
for job in rd ring; do grep -v ' Killed ' "$dir/$job" | sed "s/^/[RR_ALGO=$job] /"; done
exit $failed
