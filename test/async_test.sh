#!/usr/bin/env bash
# 1,000 asynchronous collectives across 4 processes with a timeline on: every result is
# checked by async_check; then every rank's timeline must parse as JSON, hold a slice for
# every collective, and show passes that fused several all-reduces (with RR_FUSION_BYTES=0,
# none), so fusion is known to have been exercised with interleaved dtypes and ops.
set -euo pipefail
rr=$1 check=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for fusion in default 0; do
  if [ $fusion = default ]; then unset RR_FUSION_BYTES; else export RR_FUSION_BYTES=0; fi
  mkdir "$dir/$fusion"
  RR_TIMELINE=$dir/$fusion/trace.json timeout --kill-after=5 240 "$rr" run -n 4 -- "$check" 1000
  python3 - "$dir/$fusion" 4 1000 $fusion <<'PY'
import glob, json, sys
folder, ranks, ops, fusion = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for r in range(ranks):
    files = glob.glob(f"{folder}/trace.*.{r}.json")  # trace.<job>.<rank>.json
    assert len(files) == 1, f"rank {r}: expected one trace, found {files}"
    events = json.load(open(files[0]))
    begun = {e["id"] for e in events if e.get("ph") == "b"}
    ended = {e["id"] for e in events if e.get("ph") == "e"}
    assert begun == ended == set(range(1, ops + 1)), f"rank {r}: collectives missing from the timeline"
    passes = [e for e in events if e.get("ph") == "X" and e["name"].startswith("all-gather")]
    fused = [p for p in passes if len(p["args"]["ops"]) > 1]
    assert sum(len(p["args"]["ops"]) for p in passes) == ops, f"rank {r}: passes do not cover every op"
    if fusion == "0":
        assert not fused, f"rank {r}: fused with RR_FUSION_BYTES=0"
    else:
        assert fused, f"rank {r}: no pass fused several all-reduces"
    print(f"rank {r}: timeline ok, {len(events)} events, {len(passes)} passes, {len(fused)} fused")
PY
done
