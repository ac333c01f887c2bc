#!/usr/bin/env bash
# Transports side by side on this host, one run (docs/performance.md, "Transports on one host"): for
# n = 2 and 4, all-reduce fp32 sum from 4 KiB to 256 MiB (x4), time per all-reduce and
# busbw (4-256 KiB: 200 timed iterations after 20 warm-ups; 10 were too few to hold a small
# collective's time still here; 1-4 MiB: 100 after 10, since with 2 the first size of the
# sweep carried UCX's start-up, its pools growing, at 0.6 of its later rate; 16 MiB up: 10
# after 2), over
#   tcp          ringreduce, RR_TRANSPORT=tcp (and the same from BEFORE_BUILD when given:
#                the TCP path before a change, for a before/after table)
#   ucx-tcp      ringreduce, RR_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo
#   ucx-tcp-1m   the same as the transport ran before one-fragment segments: its 256 KiB /
#                1 MiB tcp fragment sizes given by hand (which keeps 1 MiB segments) and
#                UCX_TCP_SNDBUF / UCX_TCP_RCVBUF auto (the kernel's autotuned buffers)
#   ucx-sm       ringreduce, RR_TRANSPORT=ucx UCX_TLS=sm
#   auto         ringreduce with RR_TRANSPORT=auto, the default: UCX's shared memory on this
#                one host (transport/auto_transport.h)
#   ompi-vader   Open MPI's MPI_Allreduce, --mca btl self,vader (shared memory)
#   ompi-tcp     Open MPI's MPI_Allreduce, --mca btl self,tcp on lo
# TRANSPORTS_ROUNDS=K (default 1) runs it all K times; each cell is then the round with the
# median time (bench/table.py).
# Usage: bash bench/transports.sh BUILD_DIR [BEFORE_BUILD_DIR]   (needs mpicc, mpirun)
set -uo pipefail
build=$(cd "${1:?usage: transports.sh BUILD_DIR [BEFORE_BUILD_DIR]}" && pwd)
before=${2:+$(cd "$2" && pwd)}
rr=$build/cli/ringreduce
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O2 -o "$out/mpi_allreduce" "$(dirname "$0")/mpi_allreduce.c" || exit 1
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; $("$rr" info | grep '^transports')"
# Two sweeps (small sizes with more iterations) into one file per tool and case.
ours() {  # ours NAME N RINGREDUCE ENV...: "bytes time busbw" lines
  local name=$1 n=$2 bin=$3
  shift 3
  : >"$dir/$name.n=$n"
  for sweep in "4K 256K 200 20" "1M 4M 100 10" "16M 256M 10 2"; do
    read -r lo hi iters warm <<<"$sweep"
    env "$@" "$bin" bench -N "$n" -b "$lo" -e "$hi" -f 4 -n "$iters" -w "$warm" 2>>"$dir/$name.n=$n.err" |
      awk '/^ +[0-9]/ {print $1, $6, $8, ($9 == 0 ? "" : "WRONG")}' >>"$dir/$name.n=$n"
  done
}
# Open MPI allocates a temporary buffer the size of the message in each all-reduce; from 32
# MiB glibc maps it afresh every call (its mmap threshold stops growing there), and page
# faults are dear on this guest (64 MiB at n = 2 took ten times as long). So its ranks keep
# their heap, as a long-running trainer's allocator would.
mpi() {  # mpi NAME N BTL
  : >"$dir/$1.n=$2"
  for sweep in "4096 262144 200 20" "1048576 4194304 100 10" "16777216 268435456 10 2"; do
    read -r lo hi iters warm <<<"$sweep"
    mpirun --allow-run-as-root --oversubscribe -n "$2" -x MALLOC_MMAP_THRESHOLD_=1073741824 \
      -x MALLOC_TRIM_THRESHOLD_=4294967296 --mca btl "$3" --mca btl_tcp_if_include lo \
      --mca pml ob1 "$out/mpi_allreduce" "$lo" "$hi" "$iters" "$warm" >>"$dir/$1.n=$2" 2>>"$dir/$1.n=$2.err"
  done
}
for ((round = 1; round <= ${TRANSPORTS_ROUNDS:-1}; ++round)); do
  dir=$out/round.$round
  mkdir -p "$dir"
  for n in 2 4; do
    [ -n "$before" ] && ours tcp-before $n "$before/cli/ringreduce" RR_TRANSPORT=tcp
    ours tcp $n "$rr" RR_TRANSPORT=tcp
    ours ucx-tcp $n "$rr" RR_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo
    ours ucx-tcp-1m $n "$rr" RR_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_TCP_TX_SEG_SIZE=256K \
      UCX_TCP_RX_SEG_SIZE=1M UCX_TCP_SNDBUF=auto UCX_TCP_RCVBUF=auto
    ours ucx-sm $n "$rr" RR_TRANSPORT=ucx UCX_TLS=sm
    ours auto $n "$rr" RR_TRANSPORT=auto
    mpi ompi-vader $n self,vader
    mpi ompi-tcp $n self,tcp
  done
done
python3 "$(dirname "$0")/table.py" "$out/round.*" n=2,n=4 ${before:+tcp-before} tcp ucx-tcp ucx-tcp-1m ucx-sm auto ompi-vader ompi-tcp
