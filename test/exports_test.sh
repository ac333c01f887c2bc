#!/usr/bin/env bash
# libringreduce.so exports the C API and nothing else.
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
echo "$syms"
bad=$(grep -v '^rr_' <<<"$syms" || true)
[ -z "$bad" ] || { echo "symbols outside rr_*:"; echo "$bad"; exit 1; }
for s in rr_allreduce rr_broadcast rr_allgather rr_reduce_scatter rr_barrier rr_comm_init \
         rr_comm_init_from_env rr_comm_destroy rr_version rr_last_error rr_result_string; do
  grep -qx "$s" <<<"$syms" || { echo "missing $s"; exit 1; }
done
