#!/usr/bin/env bash
# Transports side by side on this host, one run (bench/RESULTS.md, "Transports"): for
# n = 2 and 4, all-reduce fp32 sum from 4 KiB to 256 MiB (x4), 10 timed iterations after 2
# warm-ups, time per all-reduce and busbw, over
#   tcp          ringreduce, RR_TRANSPORT=tcp (and the same from BEFORE_BUILD when given:
#                the TCP path before a change, for a before/after table)
#   ucx-tcp      ringreduce, RR_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo
#   ucx-sm       ringreduce, RR_TRANSPORT=ucx UCX_TLS=sm
#   ompi-vader   Open MPI's MPI_Allreduce, --mca btl self,vader (shared memory)
#   ompi-tcp     Open MPI's MPI_Allreduce, --mca btl self,tcp on lo
# Usage: bash bench/transports.sh BUILD_DIR [BEFORE_BUILD_DIR]   (needs mpicc, mpirun)
set -uo pipefail
build=$(cd "${1:?usage: transports.sh BUILD_DIR [BEFORE_BUILD_DIR]}" && pwd)
before=${2:+$(cd "$2" && pwd)}
rr=$build/cli/ringreduce
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O2 -o "$out/mpi_allreduce" "$(dirname "$0")/mpi_allreduce.c" || exit 1
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; $("$rr" info | grep '^transports')"
ours() {  # ours NAME N RINGREDUCE ENV...: "bytes time busbw" lines
  local name=$1 n=$2 bin=$3
  shift 3
  env "$@" "$bin" bench -N "$n" -b 4K -e 256M -f 4 -n 10 -w 2 2>"$out/$name.n=$n.err" |
    awk '/^ +[0-9]/ {print $1, $6, $8, ($9 == 0 ? "" : "WRONG")}' >"$out/$name.n=$n"
}
mpi() {  # mpi NAME N BTL
  mpirun --allow-run-as-root --oversubscribe -n "$2" --mca btl "$3" --mca btl_tcp_if_include lo \
    --mca pml ob1 "$out/mpi_allreduce" 4096 268435456 10 2 >"$out/$1.n=$2" 2>"$out/$1.n=$2.err"
}
for n in 2 4; do
  [ -n "$before" ] && ours tcp-before $n "$before/cli/ringreduce" RR_TRANSPORT=tcp
  ours tcp $n "$rr" RR_TRANSPORT=tcp
  ours ucx-tcp $n "$rr" RR_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo
  ours ucx-sm $n "$rr" RR_TRANSPORT=ucx UCX_TLS=sm
  mpi ompi-vader $n self,vader
  mpi ompi-tcp $n self,tcp
done
python3 "$(dirname "$0")/table.py" "$out" n=2,n=4 ${before:+tcp-before} tcp ucx-tcp ucx-sm ompi-vader ompi-tcp
