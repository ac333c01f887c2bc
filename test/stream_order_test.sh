#!/usr/bin/env bash
# Stream ordering on the stand-in GPU (RR_TEST_FAKE_DEVICE=1), through stream_order_check.
#   stream_order_test.sh RINGREDUCE CHECK N            order, order-cold, concurrent (n > 1),
#                                                      hang (n > 1); with RR_GPU_PROGRAM=1
#                                                      also concurrent at a 16-item queue
#   stream_order_test.sh RINGREDUCE CHECK N old-design the design that hung on a real GPU
#       must fail on the stand-in too: a host function that waits for the request (a named
#       RR_ERR_TIMEOUT for the device work, and a stalled kernel on another stream); and the
#       known limit of the design in use, named: a call whose device work outnumbers the
#       GPU's queue waits for the other ranks' calls
# Every run is bounded (RR_TIMEOUT_MS and a time limit); RR_TEST_TIME_SCALE stretches them.
set -uo pipefail
rr=$1 check=$2 n=$3 what=${4:-new-design}
scale=${RR_TEST_TIME_SCALE:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export RR_TEST_FAKE_DEVICE=1
run() {  # run LIMIT_S MODE [ENV...]: prints the output, returns the status
  local limit=$(( $1 * scale )) mode=$2
  shift 2
  rm -f "$dir/go"
  env "$@" timeout --kill-after=5 "$limit" "$rr" run -n "$n" -- "$check" "$mode" "$dir" >"$dir/out" 2>&1
  local rc=$?
  sed 's/^/  /' "$dir/out"
  return $rc
}
failed=0
# must_fail WHAT PATTERN MODE [ENV...]: the run must fail, and its output match PATTERN
# (grep -E), the failure that names it.
must_fail() {
  local what=$1 pattern=$2
  shift 2
  echo "== $what (must fail, named)"
  if run 60 "$@"; then
    echo "FAILED: it passed on the stand-in"; failed=1
  elif ! grep -qE "$pattern" "$dir/out"; then
    echo "FAILED: it failed without naming the cause (wanted: $pattern)"; failed=1
  else
    echo "ok: it fails on the stand-in, named"
  fi
}
if [ "$what" = old-design ]; then
  # Named by the rank whose device work is held ("device work on fake GPU"), or, when its
  # neighbour's timeout comes first and `ringreduce run` stops the job on that rank's exit,
  # by the neighbour from the held rank's stall report ("rank 1 is waiting for device work
  # on its GPU 0 that has not finished").
  must_fail "order, holding the stream with a blocking host function" \
    'timed out: .*(device work on fake GPU|is waiting for device work on its GPU [0-9]+ that has not finished)' order RR_TEST_HOLD_STREAM=host-function RR_TIMEOUT_MS=$(( 2000 * scale ))
  # The known limit of queueing a collective's device work whole at the call: where it
  # outnumbers the GPU's queue (rule 9 of the stand-in, bounded here at 16 items), the call
  # returns only once the collective has moved, which needs the other ranks' calls. Rank 0's
  # peers here call only after rank 0's call has returned, so the call returns only when the
  # collective has failed at RR_TIMEOUT_MS, naming the ranks that did not submit it.
  must_fail "concurrent, a stream queue of 16 items: the call waits for the other ranks" \
    'rank 1 has not submitted it' concurrent RR_TEST_GPU_QUEUE_DEPTH=16 RR_TIMEOUT_MS=$(( 5000 * scale ))
  must_fail "concurrent, holding the stream with a blocking host function (a kernel on another stream stalls)" \
    'did not run within 2 s while an all-reduce was in flight' concurrent RR_TEST_HOLD_STREAM=host-function RR_TIMEOUT_MS=$(( 5000 * scale ))
  exit $failed
fi
echo "== order (n=$n)"
run 120 order RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
# The program's own kernel loaded lazily while the all-reduce holds its stream: a barrier
# across the device after the call. The device work was all queued at the call, so it passes
# (the design before, which launched kernels from the progress thread, timed out here and on
# an H200).
echo "== order-cold (n=$n): the checker kernel first launched while the all-reduce holds the stream"
run 120 order-cold RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
# The library's own kernels loaded lazily too (RR_TEST_KERNEL_LOADING=lazy): the first launch
# of each, at the call, is a barrier that waits for the work queued before it, the pass's
# earlier steps among them; the pass is already queued and raises their gates, so it passes
# (it deadlocked when the progress thread launched the kernels, and on an H200 before the
# library loaded its kernels at open).
echo "== order (n=$n), the library's kernels loaded at their first launch"
run 120 order RR_TEST_KERNEL_LOADING=lazy RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
if [ "$n" -gt 1 ]; then
  echo "== concurrent (n=$n)"
  run 120 concurrent RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
  echo "== hang (n=$n): the last rank's stream never starts the all-reduce"
  run 60 hang RR_TIMEOUT_MS=$(( 2000 * scale )) || failed=1
  # One program per collective (RR_GPU_PROGRAM=1) is one item on the GPU's queue whatever
  # the bucket's size: the known limit of the old-design run (a call waits for room, so for
  # the other ranks' calls, at a queue of 16 items) is gone.
  if [ "${RR_GPU_PROGRAM:-0}" = 1 ]; then
    echo "== concurrent (n=$n), a stream queue of 16 items, one program per collective: the call does not wait"
    run 120 concurrent RR_TEST_GPU_QUEUE_DEPTH=16 RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
  fi
fi
exit $failed
