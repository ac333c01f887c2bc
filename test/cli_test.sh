#!/usr/bin/env bash
# The CLI as a user meets it: bench tables and JSON with #wrong = 0 for every collective,
# `run` prefixing lines and passing on the status of a failed rank, `info`, `bench --device`.
set -euo pipefail
rr=$1
t() { timeout --kill-after=5 120 "$@"; }
info=$(t "$rr" info)
echo "$info"
grep -q "host reducer" <<<"$info"
for c in allreduce broadcast allgather reduce_scatter; do
  out=$(t "$rr" bench -N 3 --collective "$c" -b 1K -e 1M -f 8 -n 2 -w 1 -d int32 -o max)
  echo "$out"
  grep -q "# Out of bounds values : 0 OK" <<<"$out"
  [ "$(grep -c '^ ' <<<"$out")" = 4 ]
done
json=$(t "$rr" bench -N 2 -b 4K -e 64K -f 4 -n 2 -w 0 -d bfloat16 -o avg --format json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["wrong"]==0 and len(d["results"])==3 and d["results"][0]["busbw_gbs"]>0, d' "$json"
out=$(t "$rr" run -n 2 -- sh -c 'echo hello from $RR_RANK of $RR_SIZE')
grep -qx '\[0\] hello from 0 of 2' <<<"$out"
grep -qx '\[1\] hello from 1 of 2' <<<"$out"
set +e
start=$(date +%s)
t "$rr" run -n 3 -- sh -c 'if [ "$RR_RANK" = 1 ]; then exit 7; fi; sleep 60'
status=$?
set -e
[ $status = 7 ] || { echo "run must exit with the failed rank's status, got $status"; exit 1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "run did not stop the other ranks"; exit 1; }
if t "$rr" bench -N 2 -d notatype 2>/dev/null; then echo "bad dtype accepted"; exit 1; fi
# --device: checked and timed on a GPU where there is one; elsewhere a clear error naming
# the rank and CUDA's (or the build's) reason, and exit status 1.
set +e
out=$(t "$rr" bench -N 2 -b 1M -e 1M -n 1 -w 0 --device 2>&1)
status=$?
set -e
echo "$out"
if [ $status = 0 ]; then
  grep -q "# Out of bounds values : 0 OK" <<<"$out"
else
  [ $status = 1 ] || { echo "bench --device exited with $status"; exit 1; }
  grep -qE 'bench: --device on rank [01]: .*(\(cuda[A-Za-z]+\)|no CUDA support)' <<<"$out"
fi
echo "cli ok"
