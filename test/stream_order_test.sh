#!/usr/bin/env bash
# Stream ordering on the stand-in GPU (RR_TEST_FAKE_DEVICE=1), through stream_order_check.
#   stream_order_test.sh RINGREDUCE CHECK N            order, concurrent (n > 1), hang (n > 1)
#   stream_order_test.sh RINGREDUCE CHECK N old-design the design that hung on a real GPU (a
#       host function that waits for the request) must fail on the stand-in too: with a
#       named RR_ERR_TIMEOUT for the device work, and a stalled kernel on another stream
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
if [ "$what" = old-design ]; then
  echo "== order, holding the stream with a blocking host function (must fail, named)"
  if run 60 order RR_TEST_HOLD_STREAM=host-function RR_TIMEOUT_MS=$(( 2000 * scale )); then
    echo "FAILED: the old design passed on the stand-in"; failed=1
  elif ! grep -q 'timed out: .*device work on fake GPU' "$dir/out"; then
    echo "FAILED: the old design failed without a named device timeout"; failed=1
  else
    echo "ok: the old design deadlocks on the stand-in and is reported as a device timeout"
  fi
  echo "== concurrent, holding the stream with a blocking host function (must fail)"
  if run 60 concurrent RR_TEST_HOLD_STREAM=host-function RR_TIMEOUT_MS=$(( 5000 * scale )); then
    echo "FAILED: kernels on another stream ran under the old design"; failed=1
  elif ! grep -q 'did not run within 2 s while an all-reduce was in flight' "$dir/out"; then
    echo "FAILED: the old design failed for another reason"; failed=1
  else
    echo "ok: under the old design a kernel on another stream stalls"
  fi
  exit $failed
fi
echo "== order (n=$n)"
run 120 order RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
if [ "$n" -gt 1 ]; then
  echo "== concurrent (n=$n)"
  run 120 concurrent RR_TIMEOUT_MS=$(( 20000 * scale )) || failed=1
  echo "== hang (n=$n): the last rank's stream never starts the all-reduce"
  run 60 hang RR_TIMEOUT_MS=$(( 2000 * scale )) || failed=1
fi
exit $failed
