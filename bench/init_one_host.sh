#!/usr/bin/env bash
# What RR_TRANSPORT=auto costs at init where every rank shares this host (docs/performance.md,
# "Init under auto"): `ringreduce run -n N -- scale_check` for each N of
# RANKS (default "4 16 64") under RR_TRANSPORT=tcp and then auto, for each BUILD given (a
# build folder before a change and one after, each with cli/ringreduce and
# test/scale_check), ROUNDS times, alternating; prints the slowest rank's init.
# Usage: bash bench/init_one_host.sh ROUNDS BUILD...
set -uo pipefail
rounds=$1
shift
ranks=${RANKS:-4 16 64}
for ((i = 1; i <= rounds; ++i)); do
  for n in $ranks; do
    for build in "$@"; do
      for mode in tcp auto; do
        line=$(RR_TRANSPORT=$mode timeout 300 "$build/cli/ringreduce" run -n "$n" -- "$build/test/scale_check" 2>&1 |
          grep -o 'ranks: init [0-9.]* s')
        echo "round $i, n = $n, $build, RR_TRANSPORT=$mode: ${line:-failed}"
      done
    done
  done
done
