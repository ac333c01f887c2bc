#!/usr/bin/env bash
# A real job of N ranks on this host under RR_TRANSPORT=auto (test/scale_check: init, 100
# all-reduces of 4 KiB, 10 of 1 MiB, every result checked): it must form over UCX's shared
# memory on every rank (each logs "the job runs over ucx" at INFO) and compute right. Where
# the test may mount a tmpfs of its own, the job runs with a /dev/shm of 64 MiB, a
# container's (Docker's default), as in a trainer's container: 14 ranks fitted in that while
# UCX's receive buffers grew 512 at a time (4.3 MB per rank), 64 fit with 32.
# Usage: auto_scale_test.sh RINGREDUCE SECONDS N SCALE_CHECK
set -uo pipefail
rr=$1 secs=$2 n=$3 check=$4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
shm=("$(dirname "$0")/with_small_shm.sh" 64M)
if "${shm[@]}" true; then
  echo "the job's /dev/shm: a tmpfs of 64 MiB"
else
  shm=()
  echo "the job's /dev/shm: this host's (a tmpfs of its own cannot be mounted here)"
fi
RR_TRANSPORT=auto RR_LOG_LEVEL=info "${shm[@]}" bash "$(dirname "$0")/run_ranks.sh" "$rr" "$secs" "$n" "$check" >"$log" 2>&1
rc=$?
grep -h "ranks: init" "$log"
grep -h "RR_TRANSPORT=auto: ucx, because\|RR_TRANSPORT=auto: tcp, because" "$log" | head -1
over=$(grep -c "RR_TRANSPORT=auto: the job runs over ucx" "$log")
if [ $rc = 0 ] && [ "$over" = "$n" ] && grep -q "$n ranks: .* 0 wrong elements" "$log"; then
  echo "auto: $n of $n ranks ran over ucx, results right"
  exit 0
fi
echo "FAILED: exit $rc, $over of $n ranks said they run over ucx"
grep -v "\[info\]" "$log" | tail -20
exit 1
