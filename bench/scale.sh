#!/usr/bin/env bash
# Real jobs on this host: `ringreduce run -n N` of test/scale_check (init, 100 all-reduces
# of 4 KiB, 10 of 1 MiB, every result checked) for N = 32, 64, 128, and the rendezvous
# under 2,048 simulated ranks (test/rendezvous_load). An iperf3 loopback stream first: the
# link rate bench/model.py uses for these jobs.
# RR_SCALE_ROUNDS=K (default 3) runs the jobs K times, the sizes alternating; bench/model.py
# takes the median of each figure (one run of 10 all-reduces of 1 MiB varies by about 10%).
# Usage: bash bench/scale.sh BUILD_DIR [N...]
set -uo pipefail
build=$(cd "${1:?usage: scale.sh BUILD_DIR [N...]}" && pwd)
shift
counts=("$@")
# The TCP backend, whose link rate iperf3 measures below (RR_TRANSPORT=auto would take UCX's
# shared memory for these one-host jobs). A caller's RR_TRANSPORT wins.
export RR_TRANSPORT=${RR_TRANSPORT:-tcp}
[ ${#counts[@]} -gt 0 ] || counts=(32 64 128)
echo "# $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
if command -v iperf3 >/dev/null; then
  iperf3 -s -1 -D -p 5299 >/dev/null 2>&1
  sleep 0.3
  iperf3 -c 127.0.0.1 -p 5299 -t 3 -f g 2>/dev/null | awk '/receiver/ {print "# iperf3 loopback: " $7 " Gbit/s"}'
fi
"$build/test/rendezvous_load" 2048 | sed 's/^/# /'
for ((round = 1; round <= ${RR_SCALE_ROUNDS:-3}; ++round)); do
  for n in "${counts[@]}"; do
    start=$(date +%s.%N)
    timeout 600 "$build/cli/ringreduce" run -n "$n" -- "$build/test/scale_check" 2>&1 | grep -E 'ranks:|FAILED' | sed 's/^\[0\] //'
    echo "# n=$n (round $round): the whole job took $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
  done
done
