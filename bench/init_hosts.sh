#!/usr/bin/env bash
# What RR_TRANSPORT=auto costs at init across hosts (docs/performance.md, "Init under
# auto"): 4 ranks, one per emulated host (network namespaces, unshaped veth links;
# scripts/netns_hosts.sh), run test/scale_check under RR_TRANSPORT=tcp and then auto, for
# each SCALE_CHECK given (a build before a change and one after), ROUNDS times, alternating;
# prints the slowest rank's init (and scale_check's all-reduce times, which over unshaped
# veth links on 2 cores are noise, not a figure).
# Needs root and iproute2.
# Usage: bash bench/init_hosts.sh ROUNDS SCALE_CHECK...
set -uo pipefail
rounds=$1
shift
source "$(dirname "$0")/../scripts/netns_hosts.sh"
tag=rri$$
dir=$(mktemp -d)
hosts_up "$tag" 4 10.236.0 || { echo "cannot make network namespaces here" >&2; exit 1; }
trap 'hosts_down "$tag" 4; rm -rf "$dir"' EXIT
port=29700
for ((i = 1; i <= rounds; ++i)); do
  for bin in "$@"; do
    for mode in tcp auto; do
      port=$((port + 1))
      pids=()
      for r in 0 1 2 3; do
        ip netns exec "$tag-$r" env RR_RANK=$r RR_SIZE=4 RR_ADDR=10.236.0.1:$port RR_SECRET=init-hosts \
          RR_TRANSPORT=$mode timeout 60 "$bin" >"$dir/out.$r" 2>&1 &
        pids+=($!)
      done
      for r in 0 1 2 3; do wait "${pids[$r]}" || echo "$bin $mode: rank $r failed: $(tail -1 "$dir/out.$r")"; done
      echo "round $i, $bin, RR_TRANSPORT=$mode: $(grep -h 'ranks: init' "$dir/out.0")"
    done
  done
done
