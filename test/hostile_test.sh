#!/usr/bin/env bash
# Hostile input during a job on loopback. A hostile client (hostile_client.py) attacks the
# rendezvous port while the ranks gather: random bytes, a wrong HMAC, half a handshake that
# then stalls, a 4 GiB length prefix, a silent connection, a hello of the previous protocol
# version (an old build). A misconfigured process with the
# right secret but another size tries to join, and a second process claims rank 1. Then,
# while the job runs 500 collectives, the client attacks the rendezvous port again and any
# port the ranks still listen on (usually none: a rank closes its data port once both ring
# neighbours are in, so "none" below is the expected finding, not a probe that missed).
# The job must form and its results stay correct (async_check checks them); every
# rejection must be logged with the peer's address; exactly one of the two rank-1
# processes is turned away, told that rank 1 joined twice (or, if it came late,
# that all ranks had joined, or, later still, refused by the closed port).
set -uo pipefail
check=$1 client=$2
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port=$(python3 "$(dirname "$0")/free_port.py")
export RR_ADDR=127.0.0.1:$port RR_SECRET=hostile-test RR_SIZE=4 RR_TIMEOUT_MS=30000
# Rank 0 first; the others only once every hostile connection is in (and 6 s later), so the
# attacks are sure to land while rank 0 gathers the ranks.
python3 "$client" 127.0.0.1 "$port" 10 "$dir/ready" >"$dir/client1" 2>&1 &
client1=$!
pids=()
RR_RANK=0 timeout --kill-after=5 90 "$check" 500 >"$dir/out.0" 2>&1 &
pids+=($!)
for _ in $(seq 1 500); do [ -f "$dir/ready" ] && break; sleep 0.02; done
[ -f "$dir/ready" ] || echo "the hostile client never got in"
sleep 6  # longer than the 5 s handshake deadline: the stalled connections must be dropped
# The process of another size goes alone and is turned away before the others start: once
# all four ranks joined, rank 0 closes its port and a late one would only be refused.
RR_RANK=3 RR_SIZE=5 timeout 40 "$check" 500 >"$dir/out.size" 2>&1
for r in 1 2 3; do
  RR_RANK=$r timeout --kill-after=5 90 "$check" 500 >"$dir/out.$r" 2>&1 &
  pids+=($!)
done
RR_RANK=1 timeout --kill-after=5 90 "$check" 500 >"$dir/out.dup" 2>&1 &
dup=$!
# During the job: the rendezvous port again, and whatever the ranks listen on.
sleep 0.5
# (the ranks are the children of the `timeout` processes whose pids were kept)
procs=$(for p in "${pids[@]}"; do echo "$p"; pgrep -P "$p"; done | paste -sd'|')
listening=$(ss -ltnpH 2>/dev/null | grep -E "pid=($procs)," | awk '{print $4}' | sed 's/.*://' | sort -u)
python3 "$client" 127.0.0.1 "$port" 1 >"$dir/client2" 2>&1
for p in $listening; do python3 "$client" 127.0.0.1 "$p" 1 >>"$dir/client2" 2>&1; done
ok=1
statuses=()
for r in 0 1 2 3; do wait "${pids[$r]}"; statuses+=($?); done
wait $dup; dupStatus=$?
wait $client1
cat "$dir/client1" "$dir/client2"
echo "ports the ranks listened on during the job: ${listening:-none}"
for r in 0 1 2 3 dup size; do echo "--- $r"; grep -v '^\[.*\] \[ringreduce' "$dir/out.$r" | tail -3; done
# rank 1 and its double: exactly one of them is in the job
ones=0
[ "${statuses[1]}" = 0 ] && ones=$((ones + 1))
[ "$dupStatus" = 0 ] && ones=$((ones + 1))
[ $ones = 1 ] || { echo "expected exactly one rank 1 to be admitted"; ok=0; }
# (one that reaches rank 0 only after the job formed and the port closed is refused by the
# kernel and says so when its connect deadline passes; never "connection reset")
grep -q -E "rank 1 joined twice|all 4 ranks have already joined|could not connect to rank 0 .*Connection refused" \
  "$dir/out.1" "$dir/out.dup" || { echo "the second rank 1 was not told why"; ok=0; }
for r in 0 2 3; do [ "${statuses[$r]}" = 0 ] || { echo "rank $r failed"; ok=0; }; done
grep -q "0 wrong" "$dir/out.0" || ok=0
grep -q "has size 5, rank 0 has size 4" "$dir/out.size" || { echo "the size-5 process was not told why"; ok=0; }
for why in "bad magic" "HMAC of the challenge does not match" "connection closed by client" "timed out waiting for client" \
  "protocol version [0-9]* differs from this rank's [0-9]*"; do
  grep -q "rejected connection from 127.0.0.1:[0-9]*: .*$why" "$dir/out.0" || { echo "rank 0 did not log a rejection: $why"; ok=0; }
done
[ $ok = 1 ] && echo "hostile input: job formed, results correct, every attack rejected and logged"
[ $ok = 1 ]
