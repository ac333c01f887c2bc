#!/usr/bin/env bash
# UCX over shared memory, the ways a large frame can travel, next to Open MPI's vader, one
# run, n = 2 and 4 on this host, the four alternating (docs/performance.md, "UCX's
# settings"): all-reduce, fp32 sum, time per all-reduce in us, each cell the median of
# ROUNDS rounds.
#   pull     RR_TRANSPORT=ucx UCX_TLS=sm: frames of 256 KiB and more read by the receiver
#   eager    UCX_TLS=posix,sysv,self: no cma, so no pull (every frame through UCX's queues)
#   rndv     UCX_TLS=sm UCX_RNDV_THRESH=256K: UCX's own rendezvous (aborts on a dead peer)
#   vader    mpirun --mca btl self,vader MPI_Allreduce (bench/mpi_allreduce.c), its heap kept
#            (MALLOC_MMAP_THRESHOLD_: bench/transports.sh says why)
#   before   with BEFORE=OTHER_BUILD_DIR: pull's settings on that build (a before/after table)
# Usage: [BEFORE=DIR] bash bench/ucx_sm.sh BUILD_DIR [ROUNDS] [MIN] [MAX] [ITERS]   (needs Open MPI)
set -uo pipefail
build=$(cd "${1:?usage: ucx_sm.sh BUILD_DIR [ROUNDS] [MIN] [MAX] [ITERS]}" && pwd)
rounds=${2:-3} min=${3:-256K} max=${4:-64M} iters=${5:-20}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O2 -o "$out/mpi_allreduce" "$here/mpi_allreduce.c" || exit 1
rr=$build/cli/ringreduce
kinds="pull eager rndv vader"
if [ -n "${BEFORE:-}" ]; then
  before=$(cd "$BEFORE" && pwd)/cli/ringreduce
  kinds="before $kinds"
fi
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $rounds rounds, $iters timed iterations per size"
for ((k = 1; k <= rounds; ++k)); do
  for n in 2 4; do
    for t in $kinds; do
      case $t in
        before) RR_TRANSPORT=ucx UCX_TLS=sm "$before" bench -N $n -b $min -e $max -f 4 -n $iters -w 2 -c 0 ;;
        pull) RR_TRANSPORT=ucx UCX_TLS=sm "$rr" bench -N $n -b $min -e $max -f 4 -n $iters -w 2 -c 0 ;;
        eager) RR_TRANSPORT=ucx UCX_TLS=posix,sysv,self "$rr" bench -N $n -b $min -e $max -f 4 -n $iters -w 2 -c 0 ;;
        rndv) RR_TRANSPORT=ucx UCX_TLS=sm UCX_RNDV_THRESH=256K "$rr" bench -N $n -b $min -e $max -f 4 -n $iters -w 2 -c 0 ;;
        vader) mpirun --allow-run-as-root --oversubscribe -n $n -x MALLOC_MMAP_THRESHOLD_=1073741824 \
                 -x MALLOC_TRIM_THRESHOLD_=4294967296 --mca btl self,vader --mca pml ob1 "$out/mpi_allreduce" \
                 $(numfmt --from=iec $min) $(numfmt --from=iec $max) $iters 2 |
                 awk '$1 ~ /^[0-9]+$/ {printf "  %d x x x x %s\n", $1, $2}' ;;
      esac 2>/dev/null | awk -v t=$t -v n=$n '/^ +[0-9]/ {print n, t, $1, $6}'
    done
  done
done >"$out/runs"
python3 - "$out/runs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    n, t, b, us = line.split()
    rows.setdefault((int(n), int(b)), {}).setdefault(t, []).append(float(us))
before = any("before" in r for r in rows.values())
print("| n | size |" + (" before |" if before else "") + " pull | eager | UCX rendezvous | vader | pull / vader busbw |"
      + (" before / vader |" if before else "") + " eager / vader |")
print("|---:|---:|" + ("---:|" * (8 if before else 6)))
for (n, b) in sorted(rows):
    m = {t: statistics.median(v) for t, v in rows[(n, b)].items()}
    size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
    get = lambda t: m.get(t, float("nan"))
    print(f"| {n} | {size} |" + (f" {get('before'):.0f} |" if before else "")
          + f" {get('pull'):.0f} | {get('eager'):.0f} | {get('rndv'):.0f} | {get('vader'):.0f} | "
          f"{get('vader') / get('pull'):.2f} |" + (f" {get('vader') / get('before'):.2f} |" if before else "")
          + f" {get('vader') / get('eager'):.2f} |")
PY
