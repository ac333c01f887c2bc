#!/usr/bin/env bash
# The loopback benchmark (docs/performance.md, "Bandwidth on loopback"): the single-stream TCP rate that iperf3
# measures on 127.0.0.1 (the bound), then `ringreduce bench` for n = 2 and 4 from 4 KiB to
# 256 MiB, then iperf3 again, all in one run so that the ratio compares like with like.
# Usage: bench/loopback.sh [BUILD_DIR]     (needs iperf3)
set -euo pipefail
build=${1:-build}
rr=$build/cli/ringreduce
# The TCP backend against iperf3's TCP stream (RR_TRANSPORT=auto would take UCX's shared
# memory here: bench/transports.sh measures that). A caller's RR_TRANSPORT wins.
export RR_TRANSPORT=${RR_TRANSPORT:-tcp}
iperf() {
  iperf3 -s -1 -B 127.0.0.1 -p 5299 >/dev/null 2>&1 &
  sleep 0.5
  iperf3 -c 127.0.0.1 -p 5299 -t 5 -f g | grep -E 'receiver'
  wait
}
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(uname -r)"
echo "## iperf3 -c 127.0.0.1 -t 5 (single TCP stream), before"
iperf
for n in 2 4; do
  echo "## $rr bench -N $n -b 4K -e 256M -f 4 -n 10 -w 2"
  "$rr" bench -N "$n" -b 4K -e 256M -f 4 -n 10 -w 2
done
echo "## iperf3, after"
iperf
