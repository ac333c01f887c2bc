#!/usr/bin/env bash
# Faults in the middle of a 64 MiB all-reduce on 4 ranks (RR_TEST_N=N: N ranks) over loopback: SIGKILL, SIGSTOP
# (RR_TIMEOUT_MS=3000), a different count, exit without calling, rr_comm_abort, a rank late
# in user code (rank 0: the others must name it, not their neighbour), SIGSTOP in a loop
# of small fused all-reduces, and (stopfree, not among the defaults) SIGSTOP with every
# survivor unmapping its bucket after the error, then resuming the victim before destroy. The victim is rank 2 (rank 1 when N = 2) unless said otherwise. Every surviving
# rank must return the named error, naming the culprit where it is a timeout, within the
# timeout + 2 s of the fault, then the survivors form a new communicator and all-reduce
# correctly, with no fd or thread left behind (fault_check checks each rank; this script
# starts them).
# Usage: fault_test.sh FAULT_CHECK [MODE...]
#   RR_TEST_REPEAT=N runs each mode N times; RR_TEST_BOUND_FACTOR=F makes the bound
#   timeout x F + 0.5 s instead of timeout + 2 s (to catch a failure at twice the timeout).
set -uo pipefail
check=$1
shift
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(kill stop count exit abort late stopsmall)
repeat=${RR_TEST_REPEAT:-1}
n=${RR_TEST_N:-4}
last_rank=$((n - 1))
dir=$(mktemp -d)
# reap PID...: each rank's `timeout` wrapper and the rank under it (killing the wrapper
# alone would leave a live victim behind, orphaned).
reap() { for p in "$@"; do pkill -9 -P "$p"; kill -9 "$p"; done 2>/dev/null; }
trap 'reap $(jobs -p); rm -rf "$dir"' EXIT
# Ports outside the kernel's ephemeral range: the second address is bound only after the
# fault, by when a port from that range may be some connection's local end (free_port.py).
port() { python3 "$(dirname "$0")/free_port.py" "$@"; }
failed=0
for mode in "${modes[@]}"; do
  victim=$((n > 2 ? 2 : 1)) culprit=
  case $mode in
    kill|exit) code=4 timeout_ms=20000 ;;  # RR_ERR_PEER_LOST
    stop|stopsmall|stopfree) code=3 timeout_ms=${RR_TEST_STOP_TIMEOUT_MS:-3000} culprit="rank $victim " ;;  # RR_ERR_TIMEOUT
    late) code=3 timeout_ms=3000 victim=0 culprit="rank 0 has not submitted" ;;
    count) code=2 timeout_ms=20000 ;;      # RR_ERR_MISMATCH
    abort) code=6 timeout_ms=20000 ;;      # RR_ERR_ABORTED
  esac
  survivors=()
  for r in $(seq 0 $last_rank); do [ $r = $victim ] || survivors+=($r); done
  for ((run = 1; run <= repeat; ++run)); do
    rm -f "$dir"/*
    ports=($(port 2))
    p1=${ports[0]} p2=${ports[1]}
    pids=()
    for r in $(seq 0 $last_rank); do
      RR_RANK=$r RR_SIZE=$n RR_ADDR=127.0.0.1:$p1 RR_TEST_ADDR2=127.0.0.1:$p2 RR_SECRET=fault-test \
        RR_TIMEOUT_MS=$timeout_ms RR_CONNECT_TIMEOUT_MS=${RR_CONNECT_TIMEOUT_MS:-60000} RR_TEST_FAULT_FILE=$dir/fault RR_TEST_CULPRIT="$culprit" \
        timeout --kill-after=5 90 "$check" "$mode" $victim "$code" >"$dir/out.$r" 2>"$dir/err.$r" &
      pids+=($!)
    done
    ok=1
    for r in "${survivors[@]}"; do
      wait "${pids[$r]}" || ok=0
    done
    reap "${pids[$victim]}"
    wait "${pids[$victim]}" 2>/dev/null
    [ "$repeat" = 1 ] && for r in "${survivors[@]}"; do sed "s/^/  /" "$dir/out.$r"; done
    last=$(for r in "${survivors[@]}"; do cat "$dir/out.$r"; done | sed -n 's/.* after \(-\{0,1\}[0-9.]*\) s:.*/\1/p' | sort -g | tail -1)
    if [ -n "${RR_TEST_BOUND_FACTOR:-}" ]; then
      bound=$(python3 -c "print($timeout_ms/1000 * ${RR_TEST_BOUND_FACTOR} + 0.5)")
    else
      bound=$(python3 -c "print($timeout_ms/1000 + 2)")
    fi
    # late: the fault (the victim starting to sleep) comes before the others' deadline
    # starts; the bound counts from the fault all the same.
    [ $mode = late ] && bound=$(python3 -c "print($timeout_ms/1000 + 2.5)")
    # After a failure, peers' frames for receives never posted are said once (UCX's own
    # warning per message is not shown): no rank's output holds UCX's line.
    if grep -l "unexpected tag-receive descriptor" "$dir"/err.* >/dev/null 2>&1; then
      echo "$mode (run $run of $repeat): UCX warned of unmatched messages:"
      grep -h "unexpected tag-receive descriptor" "$dir"/err.* | head -3 | sed 's/^/  /'
      ok=0
    fi
    if [ $ok = 1 ] && [ -n "$last" ] && python3 -c "import sys; sys.exit(0 if $last <= $bound else 1)"; then
      [ "$repeat" = 1 ] && echo "$mode: every survivor failed as expected; last error ${last} s after the fault (bound ${bound} s); recovered"
    else
      echo "$mode (run $run of $repeat): FAILED (last error after ${last:-?} s, bound ${bound} s)"
      for r in "${survivors[@]}"; do sed "s/^/  out $r: /" "$dir/out.$r"; sed "s/^/  stderr $r: /" "$dir/err.$r" | tail -${RR_TEST_STDERR_LINES:-5}; done
      failed=1
    fi
  done
  [ "$repeat" -gt 1 ] && echo "$mode: $repeat runs, each within its bound${culprit:+, naming '$culprit'}"
done
exit $failed
