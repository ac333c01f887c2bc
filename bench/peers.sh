#!/usr/bin/env bash
# ringreduce next to its peers, one run: `ringreduce bench` and the same sweep (all-reduce,
# fp32 sum, in place, 1 KiB to MAX by x4) with Open MPI's MPI_Allreduce (bench/mpi_allreduce.c,
# over btl tcp and, on loopback, btl vader: shared memory) and Gloo's all-reduce
# (bench/gloo_allreduce.cc: ring and halving-doubling; Debian's libgloo-dev), time per
# all-reduce and busbw per size, one table per case:
#   loopback n = 2, 4            every rank on this host over 127.0.0.1
#   emulated hosts n = 2, 4      each rank in a network namespace of its own, its link shaped
#                                by `tc tbf` to RATE (as bench/netns_ring.sh), iperf3 first
# Every tool's results are checked (WRONG marks a size whose result was wrong). The whole
# sweep runs PEERS_ROUNDS times (default 3); each cell is the median round.
# Usage: bash bench/peers.sh BUILD_DIR [MAX_BYTES] [RATE] [BEFORE_BUILD_DIR]
#   BEFORE_BUILD_DIR adds a column for ringreduce from another build (a before/after table).
#   Where ranks outnumber this host's cores the spin is off by default (RR_SPIN_US); a column
#   ringreduce-spin200 then shows the same run with RR_SPIN_US=200 (its window where it is
#   on). ringreduce-ring is the run with RR_ALGO=ring (auto picks recursive doubling for
#   small buckets);
#   ringreduce-progress the run with RR_INLINE_BLOCKING=0 (every pass on the progress thread).
#   PEERS_ITERS (default 20) timed iterations per size; PEERS_KEEP=DIR keeps each round's
#   raw results there.
#   Every tool's ranks are bound as mpirun binds Open MPI's by default (1 or 2 ranks: one
#   core each; more: unbound), so that two ranks never share a core by the scheduler's whim.
# Needs root (namespaces), mpicc/mpirun (openmpi-bin, libopenmpi-dev), libgloo-dev, iperf3.
set -uo pipefail
build=$(cd "${1:?usage: peers.sh BUILD_DIR [MAX_BYTES] [RATE] [BEFORE_BUILD_DIR]}" && pwd)
max=${2:-268435456}
rate=${3:-1gbit}
before=${4:+$(cd "$4" && pwd)}
iters=${PEERS_ITERS:-20}
here=$(cd "$(dirname "$0")" && pwd)
rr=$build/cli/ringreduce
# ringreduce over its TCP backend, as Open MPI's and Gloo's TCP columns: RR_TRANSPORT=auto
# would take UCX's shared memory in the loopback cases (bench/transports.sh compares that
# with Open MPI's vader). A caller's RR_TRANSPORT wins.
export RR_TRANSPORT=${RR_TRANSPORT:-tcp}
out=$(mktemp -d)
tag=rrp$$
source "$here/../scripts/netns_hosts.sh"
cleanup() {
  hosts_down "$tag" 4
  # PEERS_KEEP=DIR keeps every round's raw results (each tool's output per case) there.
  [ -n "${PEERS_KEEP:-}" ] && mkdir -p "$PEERS_KEEP" && cp -r "$out"/round* "$PEERS_KEEP"/
  rm -rf "$out"
}
trap cleanup EXIT
command -v mpicc >/dev/null || { echo "peers.sh needs Open MPI: apt-get install openmpi-bin libopenmpi-dev"; exit 1; }
[ -e /usr/include/gloo/allreduce_ring.h ] || { echo "peers.sh needs Gloo: apt-get install libgloo-dev"; exit 1; }
mpicc -O2 -o "$out/mpi_allreduce" "$here/mpi_allreduce.c" || exit 1
g++ -O2 -std=c++17 -o "$out/gloo_allreduce" "$here/gloo_allreduce.cc" -lgloo -lpthread || exit 1
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $iters timed iterations per size; ringreduce $(git -C "$here" rev-parse --short HEAD 2>/dev/null)"

# Where ranks run: as mpirun binds them by default (Open MPI 4: each of 1 or 2 ranks to a
# core, 3 and more on one package unbound), every tool's ranks here are bound alike:
# `bind R N` prints the taskset prefix for rank R of N.
bind() { [ "$2" -le 2 ] && [ "$2" -le "$(nproc)" ] && echo "taskset -c $1"; }

# NAME.CASE files hold "bytes time_us busbw [WRONG]" lines.
ours() {  # ours NAME CASE N RINGREDUCE [ns]: each rank started here (bound as above)
  local name=$1 case=$2 n=$3 bin=$4 ns=${5:-} r
  local port=$((29700 + RANDOM % 200)) pids=() addr=127.0.0.1
  [ -n "$ns" ] && addr=10.232.0.1
  for ((r = 0; r < n; ++r)); do
    local netns=()
    [ -n "$ns" ] && netns=(ip netns exec "$tag-$r")
    "${netns[@]}" env RR_RANK=$r RR_SIZE=$n RR_LOCAL_SIZE=$n RR_LOCAL_CPUS=$(nproc) RR_ADDR=$addr:$port RR_SECRET=peers \
      timeout 900 $(bind $r $n) "$bin" bench -b 1K -e "$max" -f 4 -n "$iters" -w 3 >"$res/$name.$case.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  awk '/^ +[0-9]/ {print $1, $6, $8, ($9 == 0 ? "" : "WRONG")}' "$res/$name.$case.0" >"$res/$name.$case"
  cp "$res/$name.$case.0" "$res/$name.$case.err"
}
mpi() {  # mpi NAME CASE N BTL [ns]: in namespaces, each rank execs into its own
  local name=$1 case=$2 n=$3 btl=$4 ns=${5:-} cmd=("$out/mpi_allreduce") iface=lo
  local pmix=()
  if [ -n "$ns" ]; then
    cmd=(sh -c "exec ip netns exec $tag-\$OMPI_COMM_WORLD_RANK $out/mpi_allreduce \"\$@\"" mpi)
    iface=eth0
    # The ranks reach mpirun's PMIx server (TCP) over this host's own link to the bridge.
    pmix=(PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="${tag}r")
  fi
  env "${pmix[@]}" timeout 900 mpirun --allow-run-as-root --oversubscribe -n "$n" --mca btl "$btl" --mca btl_tcp_if_include "$iface" \
    --mca pml ob1 "${cmd[@]}" 1024 "$max" "$iters" 3 >"$res/$name.$case" 2>"$res/$name.$case.err"
}
gloo() {  # gloo NAME CASE N ALGO [ns]
  local name=$1 case=$2 n=$3 algo=$4 ns=${5:-} store
  store=$(mktemp -d -p "$out")
  if [ -z "$ns" ]; then
    timeout 900 "$rr" run -n "$n" --bind-to auto -- "$out/gloo_allreduce" "$algo" "$store" 1024 "$max" "$iters" 3 \
      >"$res/$name.$case.raw" 2>"$res/$name.$case.err"
    sed -n 's/^\[0\] //p' "$res/$name.$case.raw" >"$res/$name.$case"
    return
  fi
  local pids=()
  for ((r = 0; r < n; ++r)); do
    ip netns exec "$tag-$r" env RR_RANK=$r RR_SIZE=$n GLOO_HOST=10.232.0.$((r + 1)) \
      timeout 900 $(bind $r $n) "$out/gloo_allreduce" "$algo" "$store" 1024 "$max" "$iters" 3 >"$res/$name.$case.$r" 2>>"$res/$name.$case.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cp "$res/$name.$case.0" "$res/$name.$case"
}

names=(${before:+ringreduce-before} ringreduce ringreduce-ring ringreduce-progress ringreduce-spin200 ompi-tcp ompi-vader gloo-ring gloo-hd)
run_case() {  # run_case CASE N [ns]
  local case=$1 n=$2 ns=${3:-}
  [ -n "$before" ] && ours ringreduce-before "$case" "$n" "$before/cli/ringreduce" $ns
  ours ringreduce "$case" "$n" "$rr" $ns
  # Auto runs recursive doubling up to its threshold: this column is the ring.
  RR_ALGO=ring ours ringreduce-ring "$case" "$n" "$rr" $ns
  # The bench's blocking calls run on its own thread; this column hands every pass to the
  # progress thread (the path of every call before RR_INLINE_BLOCKING).
  RR_INLINE_BLOCKING=0 ours ringreduce-progress "$case" "$n" "$rr" $ns
  # More ranks than cores: the spin is off by default; this column forces it on.
  [ "$n" -gt "$(nproc)" ] && RR_SPIN_US=200 ours ringreduce-spin200 "$case" "$n" "$rr" $ns
  mpi ompi-tcp "$case" "$n" self,tcp $ns
  [ -z "$ns" ] && mpi ompi-vader "$case" "$n" self,vader
  gloo gloo-ring "$case" "$n" ring $ns
  gloo gloo-hd "$case" "$n" halving_doubling $ns
}
# Emulated hosts: four namespaces on a bridge, each link shaped to RATE both ways.
hosts=0
if hosts_up "$tag" 4 10.232.0 "$rate"; then
  hosts=1
  # This host on the bridge too (only mpirun's PMIx server talks over it).
  hosts_join "$tag" 10.232.0.100
  if command -v iperf3 >/dev/null; then
    ip netns exec "$tag-1" iperf3 -s -1 -D >/dev/null 2>&1
    sleep 0.5
    ip netns exec "$tag-0" iperf3 -c 10.232.0.2 -t 3 -f g 2>/dev/null |
      awk '/receiver/ {print "# emulated hosts: tc tbf '"$rate"' per link; iperf3 one stream: " $7 " Gbit/s"}'
  fi
else
  echo "# emulated hosts skipped: network namespaces unavailable (needs root)"
fi
# PEERS_ROUNDS rounds of every case (each tool in turn within a round); the tables show the
# median round per size, so that one noisy moment on a shared machine does not decide a cell.
rounds=${PEERS_ROUNDS:-3}
for ((k = 1; k <= rounds; ++k)); do
  res=$out/round$k
  mkdir -p "$res"
  run_case loopback-n2 2
  run_case loopback-n4 4
  if [ $hosts = 1 ]; then
    run_case hosts-n2 2 ns
    run_case hosts-n4 4 ns
  fi
done
echo "# each cell: the median of $rounds rounds"

python3 "$here/table.py" "$out/round*" loopback-n2,loopback-n4,hosts-n2,hosts-n4 "${names[@]}"
