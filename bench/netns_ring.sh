#!/usr/bin/env bash
# Emulated hosts: each rank in a network namespace of its own, joined by veth pairs to a
# bridge, every rank's link limited to RATE by `tc tbf` (egress of both ends of its veth),
# as separate hosts with one NIC each. Runs `ringreduce bench` (all-reduce, fp32 sum) for
# each N at the given sizes, and iperf3 between two namespaces first: the link rate the
# busbw is measured against (busbw = algbw x 2(n-1)/n reads as the link rate).
# Needs root and iproute2 (10.232.0.0/24 exists only inside these namespaces).
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
echo "# emulated hosts: $max namespaces, tc tbf $rate per link, $(nproc) cores"
if command -v iperf3 >/dev/null; then
  ip netns exec "$tag-1" iperf3 -s -1 -D >/dev/null 2>&1
  sleep 0.5
  ip netns exec "$tag-0" iperf3 -c 10.232.0.2 -t 3 -f g 2>/dev/null | awk '/receiver/ {print "# iperf3 one stream: " $7 " Gbit/s"}'
fi
for n in "${counts[@]}"; do
  port=$((29600 + n))
  pids=()
  dir=$(mktemp -d)
  for ((r = 0; r < n; ++r)); do
    minb=$(echo $sizes | awk '{print $1}') maxb=$(echo $sizes | awk '{print $NF}')
    ip netns exec "$tag-$r" env RR_RANK=$r RR_SIZE=$n RR_ADDR=10.232.0.1:$port RR_SECRET=netns-bench \
      timeout 600 "$rr" bench -b "$minb" -e "$maxb" -f 4 -n "${RR_BENCH_ITERS:-5}" -w 1 >"$dir/out.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  echo "# n=$n"
  grep -E '^ +[0-9]' "$dir/out.0" | awk -v n=$n '{printf "n=%d %10d B  time %10.0f us  busbw %.4f GB/s\n", n, $1, $6, $8}'
  rm -rf "$dir"
done
