#!/usr/bin/env bash
# Bytes on the wire per all-reduce, ringreduce next to Open MPI, on emulated hosts: N ranks,
# each in a network namespace of its own with its link shaped by `tc tbf` to RATE (as
# bench/peers.sh), one bucket size, ROUNDS rounds with the tools alternating. Each line: the
# time per all-reduce, then what every rank's eth0 sent during the run (from `tc -s qdisc`:
# bytes and packets as the shaper counts them, Ethernet and IP headers and ACKs included,
# divided by ranks and by the all-reduces, warm-ups counted; the few start-up messages are
# spread over them), and the time those bytes take at RATE: the bound no tool can beat once
# the link is the bottleneck (tbf's burst lets a run start a little under it).
# Usage: bash bench/wire.sh BUILD_DIR N BYTES [RATE]
#   WIRE_ROUNDS (3), WIRE_ITERS (1000), WIRE_WARMUP (20); WIRE_ALGOS: the RR_ALGO values to
#   run (default "auto").
# Needs root (namespaces), mpicc/mpirun (openmpi-bin, libopenmpi-dev).
set -uo pipefail
build=$(cd "${1:?usage: wire.sh BUILD_DIR N BYTES [RATE]}" && pwd)
n=${2:?usage: wire.sh BUILD_DIR N BYTES [RATE]}
bytes=${3:?usage: wire.sh BUILD_DIR N BYTES [RATE]}
rate=${4:-1gbit}
rounds=${WIRE_ROUNDS:-3}
iters=${WIRE_ITERS:-1000}
warm=${WIRE_WARMUP:-20}
here=$(cd "$(dirname "$0")" && pwd)
rr=$build/cli/ringreduce
out=$(mktemp -d)
tag=rrw$$
source "$here/../scripts/netns_hosts.sh"
trap 'hosts_down "$tag" 4; rm -rf "$out"' EXIT
[ "$n" -ge 2 ] && [ "$n" -le 4 ] || { echo "wire.sh: N must be 2 to 4 (the namespaces of netns_hosts.sh)"; exit 1; }
command -v mpicc >/dev/null || { echo "wire.sh needs Open MPI: apt-get install openmpi-bin libopenmpi-dev"; exit 1; }
mpicc -O2 -o "$out/mpi_allreduce" "$here/mpi_allreduce.c" || exit 1
hosts_up "$tag" 4 10.232.0 "$rate" || { echo "wire.sh needs network namespaces (root)"; exit 1; }
hosts_join "$tag" 10.232.0.100  # mpirun's PMIx server talks over it
# The rate in bit/s, as tc reads it back.
bps=$(ip netns exec "$tag-0" tc qdisc show dev eth0 | awk '{for (i = 1; i < NF; ++i) if ($i == "rate") {
  v = $(i + 1); m = v ~ /Gbit/ ? 1e9 : v ~ /Mbit/ ? 1e6 : v ~ /Kbit/ ? 1e3 : 1; printf "%.0f\n", (v + 0) * m; exit } }')
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; $n emulated hosts, tc tbf $rate ($bps bit/s); $bytes bytes, $iters timed all-reduces after $warm warm-ups; ringreduce $(git -C "$here" rev-parse --short HEAD 2>/dev/null)"
sent() {  # bytes and packets sent by the ranks' eth0, summed
  local r b=0 p=0 bb pp
  for ((r = 0; r < n; ++r)); do
    read -r bb pp < <(ip netns exec "$tag-$r" tc -s qdisc show dev eth0 | awk '/Sent/ {print $2, $4; exit}')
    b=$((b + bb)) p=$((p + pp))
  done
  echo "$b $p"
}
report() {  # report NAME TIME_US BEFORE AFTER
  local b0 p0 b1 p1
  read -r b0 p0 <<<"$3"
  read -r b1 p1 <<<"$4"
  awk -v name="$1" -v t="$2" -v b=$((b1 - b0)) -v p=$((p1 - p0)) -v ops=$((iters + warm)) -v n="$n" -v bps="$bps" 'BEGIN {
    w = b / ops / n; printf "%-22s %9.1f us   per rank per all-reduce: %8.0f bytes %6.1f packets   bound %9.1f us   time/bound %.3f\n",
      name, t, w, p / ops / n, w * 8 / bps * 1e6, (w > 0 ? t / (w * 8 / bps * 1e6) : 0) }'
}
for ((k = 1; k <= rounds; ++k)); do
  for algo in ${WIRE_ALGOS:-auto}; do
    port=$((29700 + RANDOM % 200)) pids=()
    before=$(sent)
    for ((r = 0; r < n; ++r)); do
      ip netns exec "$tag-$r" env RR_RANK=$r RR_SIZE=$n RR_LOCAL_SIZE=$n RR_LOCAL_CPUS=$(nproc) RR_ADDR=10.232.0.1:$port \
        RR_SECRET=wire RR_ALGO=$algo timeout 300 "$rr" bench -b "$bytes" -e "$bytes" -n "$iters" -w "$warm" >"$out/rr.$r" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    t=$(awk '/^ +[0-9]/ {print $6; exit}' "$out/rr.0")
    [ -n "$t" ] || { echo "ringreduce failed:"; tail -5 "$out/rr.0"; exit 1; }
    report "ringreduce $algo" "$t" "$before" "$(sent)"
  done
  before=$(sent)
  PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="${tag}r" timeout 300 mpirun --allow-run-as-root \
    --oversubscribe -n "$n" --mca btl self,tcp --mca btl_tcp_if_include eth0 --mca pml ob1 \
    sh -c "exec ip netns exec $tag-\$OMPI_COMM_WORLD_RANK $out/mpi_allreduce \"\$@\"" mpi "$bytes" "$bytes" "$iters" "$warm" >"$out/mpi" 2>&1
  t=$(awk '/^ *[0-9]/ {print $2; exit}' "$out/mpi")
  [ -n "$t" ] || { echo "Open MPI failed:"; tail -5 "$out/mpi"; exit 1; }
  report "ompi-tcp" "$t" "$before" "$(sent)"
done
