#!/usr/bin/env bash
# The collective test under Open MPI's launcher: ranks come from OMPI_COMM_WORLD_RANK/SIZE,
# the rendezvous address and secret are passed with -x, as a user would.
set -euo pipefail
check=$1
command -v mpirun >/dev/null || { echo "mpirun not installed: skipping"; exit 77; }
port=$(python3 "$(dirname "$0")/free_port.py")
out=$(timeout --kill-after=5 240 mpirun --allow-run-as-root --oversubscribe -np 3 \
  -x RR_ADDR=127.0.0.1:$port -x RR_SECRET=mpirun-test-secret "$check" --quick 2>&1) || {
  echo "$out"; echo "mpirun run failed"; exit 1; }
echo "$out"
[ "$(grep -c 'of 3: .* checks passed' <<<"$out")" = 3 ] || { echo "expected 3 ranks to pass"; exit 1; }
