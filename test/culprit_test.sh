#!/usr/bin/env bash
# The culprit of a hang under every algorithm: jobs of n ranks on loopback run 12 KiB
# all-reduces (test/culprit_check.cc) with RR_ALGO forced, and one rank stops (SIGSTOP)
# in the middle; every survivor must fail with a timeout that names the stopped rank and
# no other. Every n in NS, every victim position, every algorithm in ALGOS; with
# RR_TEST_QUICK set (the sanitizer parts), a sample: n = 3, 5 and 8 (unless NS is given),
# the first and last victim of each n and one between.
# Jobs run JOBS at a time (default 6): each spends most of its time waiting out
# RR_TIMEOUT_MS (1500 here, as short as the stall monitor's silence bound).
# Usage: culprit_test.sh CULPRIT_CHECK "ALGOS" "NS"
set -uo pipefail
check=$1 algos=${2:-"ring rd hd"} ns=${3:-"3 4 5 6 7 8 9"}
[ -n "${RR_TEST_QUICK:-}" ] && [ -z "${3:-}" ] && ns="3 5 8"
jobs=${RR_TEST_JOBS:-6}
dir=$(mktemp -d)
reap() { for p in "$@"; do pkill -9 -P "$p"; kill -9 "$p"; done 2>/dev/null; }
trap 'reap $(jobs -p); rm -rf "$dir"' EXIT
# job ALGO N VICTIM: one job; its verdict in $dir/ALGO.N.VICTIM.result.
job() {
  local algo=$1 n=$2 victim=$3 name="$1.$2.$3" r pids=() ok=1
  local p=$(python3 "$(dirname "$0")/free_port.py")
  for r in $(seq 0 $((n - 1))); do
    RR_RANK=$r RR_SIZE=$n RR_ADDR=127.0.0.1:$p RR_SECRET=culprit RR_ALGO=$algo RR_TIMEOUT_MS=1500 RR_SPIN_US=0 \
      RR_CONNECT_TIMEOUT_MS=30000 timeout --kill-after=5 60 "$check" $victim >"$dir/$name.out.$r" 2>"$dir/$name.err.$r" &
    pids+=($!)
  done
  for r in $(seq 0 $((n - 1))); do
    [ $r = $victim ] && continue
    wait "${pids[$r]}" || ok=0
  done
  reap "${pids[$victim]}"
  wait "${pids[$victim]}" 2>/dev/null
  if [ $ok = 1 ]; then
    echo ok >"$dir/$name.result"
  else
    { echo "FAILED: RR_ALGO=$algo n=$n, rank $victim stopped:"
      for r in $(seq 0 $((n - 1))); do [ $r = $victim ] || sed "s/^/  /" "$dir/$name.out.$r"; done
      for r in $(seq 0 $((n - 1))); do [ $r = $victim ] || grep -h "error\]" "$dir/$name.err.$r" | head -2 | cut -c1-300 | sed "s/^/  stderr $r: /"; done
    } >"$dir/$name.result"
  fi
}
count=0
start=$(date +%s)
for algo in $algos; do
  for n in $ns; do
    victims=$(seq 0 $((n - 1)))
    [ -n "${RR_TEST_QUICK:-}" ] && victims=$(printf '%s\n' 0 $((n / 2)) $((n - 1)) | sort -un)
    for victim in $victims; do
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
      job $algo $n $victim &
      count=$((count + 1))
    done
  done
done
wait
failed=0
for f in "$dir"/*.result; do
  if [ "$(cat "$f")" != ok ]; then cat "$f"; failed=$((failed + 1)); fi
done
echo "$count jobs (RR_ALGO in: $algos; n in: $ns) in $(( $(date +%s) - start )) s: $((count - failed)) named the stopped rank on every survivor, $failed did not"
[ $failed = 0 ]
