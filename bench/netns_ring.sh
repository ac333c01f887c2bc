#!/usr/bin/env bash
# Emulated hosts: each rank in a network namespace of its own, joined by veth pairs to a
# bridge, every rank's link limited to RATE by `tc tbf` (egress of both ends of its veth),
# as separate hosts with one NIC each. Runs `ringreduce bench` (all-reduce, fp32 sum) for
# each N at the given sizes, and iperf3 between two namespaces first: the link rate the
# busbw is measured against (busbw = algbw x 2(n-1)/n reads as the link rate).
# Needs root and iproute2 (10.232.0.0/24 exists only inside these namespaces).
# Before each n, iperf3 on every link at once (the ring's pattern) gives the per-link rate
# the emulation carries with n links busy. Hosts run cubic with RPS on (scripts/netns_hosts.sh).
# RR_BENCH_ITERS (default 5) iterations per size; RR_BENCH_ROUNDS (default 1) sweeps;
# RR_BENCH_FACTOR (default 4) the step between sizes. The ranks' environment passes through
# (RR_ALGO, RR_TRANSPORT, ...).
# Usage: bash bench/netns_ring.sh BUILD_DIR [RATE] [SIZES] [N...]
#   e.g. bash bench/netns_ring.sh build 1gbit "16M 64M" 2 4 6 8
set -uo pipefail
build=${1:?usage: netns_ring.sh BUILD_DIR [RATE] [SIZES] [N...]}
rate=${2:-1gbit}
sizes=${3:-16M 64M}
shift 3 2>/dev/null || shift $#
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(2 4 6 8)
rr=$(cd "$build" && pwd)/cli/ringreduce
max=0
for n in "${counts[@]}"; do [ "$n" -gt "$max" ] && max=$n; done
tag=rrb$$
source "$(dirname "$0")/../scripts/netns_hosts.sh"
cleanup() {
  kill -9 $(jobs -p) 2>/dev/null
  hosts_down "$tag" "$max"
}
trap cleanup EXIT
hosts_up "$tag" "$max" 10.232.0 "$rate" || { echo "network namespaces unavailable (need root)"; exit 77; }
echo "# emulated hosts: $max namespaces, tc tbf $rate per link, $(nproc) cores, congestion control $(ip netns exec "$tag-0" sysctl -n net.ipv4.tcp_congestion_control) (this host: $(sysctl -n net.ipv4.tcp_congestion_control)), RPS on"
if command -v iperf3 >/dev/null; then
  ip netns exec "$tag-1" iperf3 -s -1 -D >/dev/null 2>&1
  sleep 0.5
  ip netns exec "$tag-0" iperf3 -c 10.232.0.2 -t 3 -f g 2>/dev/null | awk '/receiver/ {print "# iperf3 one stream: " $7 " Gbit/s"}'
fi
# ring_iperf N: every host r sends one iperf3 stream to host r+1 at once, for 3 s (the
# ring's traffic pattern): the per-link rate the emulation carries with N links busy.
ring_iperf() {
  local n=$1 r
  for ((r = 0; r < n; ++r)); do ip netns exec "$tag-$r" iperf3 -s -1 -D -p 5202 >/dev/null 2>&1; done
  sleep 0.5
  for ((r = 0; r < n; ++r)); do
    ip netns exec "$tag-$r" iperf3 -c "10.232.0.$(( (r + 1) % n + 1 ))" -p 5202 -t 3 -f m >"$dir/iperf.$r" 2>&1 &
  done
  wait
  for ((r = 0; r < n; ++r)); do awk '/receiver/ {print $7}' "$dir/iperf.$r"; done |
    awk -v n=$n 'NF {s += $1; k++; if (min == "" || $1 < min) min = $1}
      END {if (k) printf "# iperf3 ring n=%d: %d links at once, mean %.3f Gbit/s per link, slowest %.3f\n", n, k, s / k / 1000, min / 1000}'
}
# RR_BENCH_ROUNDS=K runs the whole sweep K times, the ranks counts alternating, so that a
# slow spell of this shared machine lands on every n alike.
for ((round = 1; round <= ${RR_BENCH_ROUNDS:-1}; ++round)); do
for n in "${counts[@]}"; do
  port=$((29600 + n))
  pids=()
  dir=$(mktemp -d)
  command -v iperf3 >/dev/null && ring_iperf "$n"
  for ((r = 0; r < n; ++r)); do
    minb=$(echo $sizes | awk '{print $1}') maxb=$(echo $sizes | awk '{print $NF}')
    ip netns exec "$tag-$r" env RR_RANK=$r RR_SIZE=$n RR_ADDR=10.232.0.1:$port RR_SECRET=netns-bench \
      timeout 600 "$rr" bench -b "$minb" -e "$maxb" -f "${RR_BENCH_FACTOR:-4}" -n "${RR_BENCH_ITERS:-5}" -w 1 >"$dir/out.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  echo "# n=$n (round $round)"
  grep -E '^ +[0-9]' "$dir/out.0" | awk -v n=$n '{printf "n=%d %10d B  time %10.0f us  busbw %.4f GB/s\n", n, $1, $6, $8}'
  rm -rf "$dir"
done
done
