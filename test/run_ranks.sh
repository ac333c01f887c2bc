#!/usr/bin/env bash
# Helper for meson tests: ringreduce run with a bounded time.
# Usage: run_ranks.sh RINGREDUCE SECONDS N PROGRAM [ARGS...]
# RR_TEST_TIME_SCALE (set by the sanitizer runs, with meson's --timeout-multiplier)
# multiplies SECONDS.
set -euo pipefail
rr=$1 secs=$(( $2 * ${RR_TEST_TIME_SCALE:-1} )) n=$3
shift 3
exec timeout --kill-after=5 "$secs" "$rr" run -n "$n" -- "$@"
