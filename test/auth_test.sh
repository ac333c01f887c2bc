#!/usr/bin/env bash
# Two ranks with different secrets: rank 1 must fail with RR_ERR_AUTH naming the secret,
# rank 0 must give up with an error that says it rejected a connection; nothing hangs.
set -uo pipefail
example=$1
port=$(python3 "$(dirname "$0")/free_port.py")
export RR_ADDR=127.0.0.1:$port RR_SIZE=2 RR_TIMEOUT_MS=3000
RR_RANK=0 RR_SECRET=right timeout 20 "$example" >rank0.log 2>&1 &
p0=$!
RR_RANK=1 RR_SECRET=wrong timeout 20 "$example" >rank1.log 2>&1
s1=$?
wait $p0
s0=$?
cat rank0.log rank1.log
[ $s0 -ne 0 ] && [ $s1 -ne 0 ] || { echo "both ranks must fail"; exit 1; }
grep -q "wrong RR_SECRET" rank1.log || { echo "rank 1 must name the secret"; exit 1; }
grep -q "rejected" rank0.log || { echo "rank 0 must report the rejected connection"; exit 1; }
[ $s0 -ne 124 ] && [ $s1 -ne 124 ] || { echo "a rank hung"; exit 1; }
rm -f rank0.log rank1.log
