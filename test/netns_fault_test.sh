#!/usr/bin/env bash
# A link that goes down in the middle of a 64 MiB all-reduce: 4 ranks, each in a network
# namespace this test creates, joined by veth pairs to a bridge (10.231.0.0/24 exists only
# inside these namespaces). Once rank 2 has started, its veth is set down: no FIN, no RST,
# the packets just stop. Every survivor must fail with RR_ERR_TIMEOUT within the timeout
# (3 s) + 2 s, then the survivors form a new communicator and all-reduce correctly.
# With RR_TRANSPORT=auto and RR_LOG_LEVEL=info (a meson test of its own): the ranks are on
# hosts of their own, so auto must choose TCP, on every rank, in both communicators, and no
# rank may start UCX: ranks 1..3 know that they are not on rank 0's host from its address,
# and rank 0 from their arrivals. The fd and thread counts (fault_check) come back.
# Needs root and iproute2; skipped (exit 77) otherwise.
set -uo pipefail
check=$1
dir=$(mktemp -d)
source "$(dirname "$0")/../scripts/netns_hosts.sh"
tag=rrf$$
hosts_for_test "$tag" 4 10.231.0 "$dir"
pids=()
for r in 0 1 2 3; do
  ip netns exec "$tag-$r" env RR_RANK=$r RR_SIZE=4 RR_ADDR=10.231.0.1:29500 \
    RR_TEST_ADDR2=10.231.0.1:29501 RR_SECRET=netns-test RR_TIMEOUT_MS=3000 \
    RR_TEST_FAULT_FILE="$dir/fault" timeout --kill-after=5 90 "$check" link 2 3 \
    >"$dir/out.$r" 2>"$dir/err.$r" &
  pids+=($!)
done
for _ in $(seq 1 600); do [ -s "$dir/fault" ] && break; sleep 0.01; done
[ -s "$dir/fault" ] || { echo "rank 2 never started"; cat "$dir"/err.*; exit 1; }
ip -n "$tag-hub" link set "$(hosts_link "$tag" 2)" down
date +%s.%N >"$dir/fault"
ok=1
for r in 0 1 3; do wait "${pids[$r]}" || ok=0; done
for r in 0 1 3; do sed "s/^/  /" "$dir/out.$r"; done
last=$(cat "$dir"/out.0 "$dir"/out.1 "$dir"/out.3 | sed -n 's/.* after \(-\{0,1\}[0-9.]*\) s:.*/\1/p' | sort -g | tail -1)
if [ "${RR_TRANSPORT:-}" = auto ]; then
  for r in 0 1 3; do
    if [ "$(grep -c "ring connected over tcp" "$dir/err.$r")" != 2 ]; then
      echo "rank $r: RR_TRANSPORT=auto did not connect over tcp for both communicators:"
      grep "RR_TRANSPORT=auto\|ring connected" "$dir/err.$r" | sed 's/^/  /'
      ok=0
    fi
  done
  for r in 0 1 3; do
    [ $r = 0 ] && why="ranks 1 and [0-9]+ are on two hosts \(10.231.0.2, 10.231.0.[0-9]+\)" || why="rank 0 is on another host \(its address 10.231.0.1 is none"
    if [ "$(grep -cE "RR_TRANSPORT=auto: $why.*, so rank [0-9]+ offers TCP only and does not start UCX" "$dir/err.$r")" != 2 ]; then
      echo "rank $r: did not say, for both communicators: $why ..., so it does not start UCX"
      grep "RR_TRANSPORT=auto" "$dir/err.$r" | sed 's/^/  /'
      ok=0
    fi
    grep -h "does not start UCX" "$dir/err.$r" | head -1 | sed "s/^/  rank $r: /"
  done
fi
if [ $ok = 1 ] && [ -n "$last" ] && python3 -c "import sys; sys.exit(0 if $last <= 5 else 1)"; then
  echo "link down: every survivor timed out as expected; last error ${last} s after the link went down (bound 5 s); recovered"
else
  echo "link down: FAILED (last error after ${last:-?} s)"
  for r in 0 1 3; do sed "s/^/  stderr $r: /" "$dir/err.$r" | tail -5; done
  exit 1
fi
