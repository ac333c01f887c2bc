#!/usr/bin/env bash
# Faults in the middle of a 64 MiB all-reduce on 4 ranks over loopback (rank 2 is the
# victim): SIGKILL, SIGSTOP (RR_TIMEOUT_MS=3000), a different count, exit without calling,
# rr_comm_abort. Every surviving rank must return the named error within the timeout + 2 s
# of the fault, then the survivors form a new communicator and all-reduce correctly, with
# no fd or thread left behind (fault_check checks each rank; this script starts them).
# Usage: fault_test.sh FAULT_CHECK [MODE...]
set -uo pipefail
check=$1
shift
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(kill stop count exit abort)
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
failed=0
for mode in "${modes[@]}"; do
  case $mode in
    kill|exit) code=4 timeout_ms=20000 ;;  # RR_ERR_PEER_LOST
    stop) code=3 timeout_ms=3000 ;;        # RR_ERR_TIMEOUT
    count) code=2 timeout_ms=20000 ;;      # RR_ERR_MISMATCH
    abort) code=6 timeout_ms=20000 ;;      # RR_ERR_ABORTED
  esac
  rm -f "$dir"/*
  p1=$(port) p2=$(port)
  pids=()
  for r in 0 1 2 3; do
    RR_RANK=$r RR_SIZE=4 RR_ADDR=127.0.0.1:$p1 RR_TEST_ADDR2=127.0.0.1:$p2 RR_SECRET=fault-test \
      RR_TIMEOUT_MS=$timeout_ms RR_TEST_FAULT_FILE=$dir/fault \
      timeout --kill-after=5 90 "$check" "$mode" 2 "$code" >"$dir/out.$r" 2>"$dir/err.$r" &
    pids+=($!)
  done
  ok=1
  for r in 0 1 3; do
    wait "${pids[$r]}" || ok=0
  done
  kill -9 "${pids[2]}" 2>/dev/null
  wait "${pids[2]}" 2>/dev/null
  for r in 0 1 3; do sed "s/^/  /" "$dir/out.$r"; done
  last=$(cat "$dir"/out.0 "$dir"/out.1 "$dir"/out.3 | sed -n 's/.* after \(-\{0,1\}[0-9.]*\) s:.*/\1/p' | sort -g | tail -1)
  bound=$(python3 -c "print($timeout_ms/1000 + 2)")
  if [ $ok = 1 ] && [ -n "$last" ] && python3 -c "import sys; sys.exit(0 if $last <= $bound else 1)"; then
    echo "$mode: every survivor failed as expected; last error ${last} s after the fault (bound ${bound} s); recovered"
  else
    echo "$mode: FAILED (last error after ${last:-?} s, bound ${bound} s)"
    for r in 0 1 3; do sed "s/^/  stderr $r: /" "$dir/err.$r" | tail -5; done
    failed=1
  fi
done
exit $failed
