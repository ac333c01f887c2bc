#!/usr/bin/env bash
# The stall report: rank 3 sleeps before op #3; rank 0 must name it within the run. Then
# rank 0 itself is the late one (idle in user code): it must still name itself.
set -euo pipefail
rr=$1 check=$2
out=$(RR_STALL_WARN_S=1 timeout --kill-after=5 60 "$rr" run -n 4 -- "$check" 2>&1)
echo "$out"
grep -E '^\[0\] .*op #3 allreduce 4\.0 KiB: waiting for rank 3 \(their last submitted op is #2\)' <<<"$out"
[ "$(grep -c ': done, value 64' <<<"$out")" = 4 ]
out=$(RR_STALL_WARN_S=1 timeout --kill-after=5 60 "$rr" run -n 4 -- "$check" 0 2>&1)
echo "$out"
grep -E '^\[0\] .*op #3 allreduce 4\.0 KiB: waiting for rank 0 \(their last submitted op is #2\)' <<<"$out"
[ "$(grep -c ': done, value 64' <<<"$out")" = 4 ]
