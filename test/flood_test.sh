#!/usr/bin/env bash
# A flood of silent connections on a rank's ring-setup port during init (no secret needed
# for that): rank 1 of 4 is listening for its left neighbour and partners while 40
# connections that never say a word are held to that port (test/flood_client.py opens a
# new one whenever one is closed). The job must form and one all-reduce must be right on
# every rank (semantics_check init-report): the acceptor gives a silent connection's slot
# back after a first-byte deadline, or to a newcomer when every slot is taken, and a
# neighbour turned away tries again. Over RR_TRANSPORT (tcp, or ucx: its address port).
# Usage: flood_test.sh SEMANTICS_CHECK
set -uo pipefail
check=$1
dir=$(mktemp -d)
reap() { for p in "$@"; do pkill -9 -P "$p"; kill -9 "$p"; done 2>/dev/null; }
trap 'touch "$dir/stop"; reap $(jobs -p); rm -rf "$dir"' EXIT
port=$(python3 "$(dirname "$0")/free_port.py")
export RR_ADDR=127.0.0.1:$port RR_SECRET=flood-test RR_SIZE=4 RR_TIMEOUT_MS=30000 RR_CONNECT_TIMEOUT_MS=30000
pids=()
for r in 0 1; do
  RR_RANK=$r timeout --kill-after=5 60 "$check" init-report >"$dir/out.$r" 2>"$dir/err.$r" &
  pids+=($!)
done
# Rank 1's own listening port, once it is there (it listens before it tells rank 0 where).
flooded=
for _ in $(seq 1 500); do
  rank1=$(pgrep -P "${pids[1]}" | head -1)
  if [ -n "$rank1" ]; then
    flooded=$(ss -ltnpH 2>/dev/null | grep "pid=$rank1," | awk '{print $4}' | sed 's/.*://' | grep -vx "$port" | head -1)
    [ -n "$flooded" ] && break
  fi
  sleep 0.02
done
[ -n "$flooded" ] || { echo "FAILED: rank 1 never listened"; exit 1; }
python3 "$(dirname "$0")/flood_client.py" "$flooded" 40 90 "$dir/ready" "$dir/stop" >"$dir/flood" 2>&1 &
flood=$!
for _ in $(seq 1 500); do [ -f "$dir/ready" ] && break; sleep 0.02; done
[ -f "$dir/ready" ] || { echo "FAILED: the flood never got in"; exit 1; }
sleep 1.5  # the flood settles: every slot taken, the first silent ones dropped and back
for r in 2 3; do
  RR_RANK=$r timeout --kill-after=5 60 "$check" init-report >"$dir/out.$r" 2>"$dir/err.$r" &
  pids+=($!)
done
ok=1
for r in 0 1 2 3; do wait "${pids[$r]}" || ok=0; done
touch "$dir/stop"
wait $flood
cat "$dir/flood"
for r in 0 1 2 3; do
  sed "s/^/  /" "$dir/out.$r"
  grep -q "init: success" "$dir/out.$r" && grep -q "allreduce: right" "$dir/out.$r" || { ok=0; tail -3 "$dir/err.$r" | sed 's/^/    /'; }
done
grep -q "closed by the server" "$dir/flood" && ! grep -q " 0 closed by the server" "$dir/flood" ||
  { echo "FAILED: the server never closed a silent connection: the flood did not reach the acceptor"; ok=0; }
grep -h "rejected connection" "$dir/err.1" | head -2 | cut -c1-200 | sed 's/^/  rank 1 logged: /'
[ $ok = 1 ] && echo "a flood of 40 silent connections on rank 1's port ${flooded}: the job formed, results right"
[ $ok = 1 ]
