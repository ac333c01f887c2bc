#!/usr/bin/env bash
# Helper for meson tests: ringreduce run with a bounded time.
# Usage: run_ranks.sh RINGREDUCE SECONDS N PROGRAM [ARGS...]
set -euo pipefail
rr=$1 secs=$2 n=$3
shift 3
exec timeout --kill-after=5 "$secs" "$rr" run -n "$n" -- "$@"
