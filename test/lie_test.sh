#!/usr/bin/env bash
# A lying peer (test/lie_check.cc): in jobs of 3 ranks on loopback, rank 1 sends malformed
# but authenticated messages (RR_TEST_LIE, a build with -Dtest_lies), one lie per job; ranks
# 0 and 2 must fail named (the message matches the lie's pattern), with no wrong result
# returned as success, no hang, and no AddressSanitizer report (the ASan part runs it too).
# The lies of the transport in RR_TRANSPORT (tcp, or ucx with UCX_TLS=sm or tcp): those the
# engine and every link tell, and UCX's own.
# Usage: lie_test.sh RINGREDUCE LIE_CHECK
set -uo pipefail
rr=$1 check=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
transport=${RR_TRANSPORT:-tcp}
tls=${UCX_TLS:-}
failed=0 count=0
# lie NAME PATTERN [VAR=VALUE...]: one job; ranks 0 and 2 must both fail with a message
# that PATTERN (grep -E) matches.
lie() {
  local name=$1 pattern=$2
  shift 2
  count=$((count + 1))
  mkdir -p "$dir/judged.$name"
  env RR_TEST_LIE=$name RR_TEST_LIE_RANK=1 RR_TEST_LIE_DIR="$dir/judged.$name" RR_TIMEOUT_MS=10000 "$@" \
    timeout --kill-after=5 $(( 60 * ${RR_TEST_TIME_SCALE:-1} )) "$rr" run -n 3 -- "$check" >"$dir/$name" 2>&1
  local rc=$?
  if [ $rc = 0 ] && grep "^\[0\] rank 0: FAILED" "$dir/$name" | grep -qE -- "$pattern" &&
     grep "^\[2\] rank 2: FAILED" "$dir/$name" | grep -qE -- "$pattern"; then
    echo "$name: ranks 0 and 2 $(grep -h "^\[0\] rank 0: FAILED" "$dir/$name" | cut -d: -f3- | cut -c1-220)"
  else
    echo "FAILED: $name (exit $rc):"
    grep -v "^\[.\] \[[0-9:.]*\] \[ringreduce" "$dir/$name" | head -12 | cut -c1-400 | sed 's/^/  /'
    grep -h "ERROR: AddressSanitizer\|runtime error" "$dir/$name" | head -3 | sed 's/^/  /'
    failed=$((failed + 1))
  fi
}
# Lies that every transport carries: the engine's op headers and fusion, data frames, aborts.
lie fusion-oversize 'rank 1 sent a (pass header|fusion proposal) of [0-9]+ all-reduces .*more than rank [02] may fuse|rank 1 runs [0-9]+ collectives in one pass' RR_FUSION_BYTES=16384
lie header-count 'rank 1.*4611686018427387904|4611686018427387904.*rank 1|rank 1 sent a (pass header|fusion proposal) .*more than'
lie header-dtype 'protocol error: rank 1 sent an op header with .* dtype 99'
lie header-seq 'rank 1 (called|proposed fusing from) op #1001|op number #1001 against'
lie header-root 'root 5 against 0|rank 1 called .* root 5'
lie abort-origin-max 'protocol error: rank 1 \(.*\) sent an abort frame naming rank 2147483647'
lie abort-origin-minus 'protocol error: rank 1 \(.*\) sent an abort frame naming rank -1'
if [ "$transport" = ucx ]; then
  lie abort-long 'protocol error: rank 1 \(.*\) sent a control message .* longer than'
  lie data-long 'protocol error: rank 1 \(.*\) sent a frame longer than the [0-9]+ bytes expected|expected a data frame of [0-9]+ bytes from rank 1 \(.*\), got a data frame of'
  lie ucx-address-version 'rank 1 \(.*\) sent a UCX worker address this UCX cannot read \(format version 15'
  if [ "$tls" = tcp ]; then
    # UCX's tcp: pulls were never agreed, a descriptor is refused.
    lie pull-unagreed 'protocol error: rank 1 \(.*\) sent a frame descriptor \(a pull\) on a link where pulls were not agreed'
  else
    # Shared memory with cma: pulls agreed, each from a process proven to be the peer's.
    lie ucx-pid-peer 'rank 1 \(.*\) named process [0-9]+ as its own, which is this rank.s own process'
    lie ucx-pid-parent 'rank 1 \(.*\) named process [0-9]+ as its own, but that process does not hold its proof'
    lie pull-magic 'protocol error: rank 1 \(.*\) sent a malformed frame descriptor'
    lie pull-length 'expected a data frame of [0-9]+ bytes from rank 1 \(.*\), got a data frame of [0-9]+ bytes'
  fi
else
  lie abort-long 'protocol error: abort frame of [0-9]+ bytes from rank 1'
  lie data-long 'expected a data frame of [0-9]+ bytes from rank 1 \(.*\), got a data frame \(type 1\) of [0-9]+ bytes'
fi
lie data-short 'expected a data frame of [0-9]+ bytes from rank 1 \(.*\), got a data frame.* of [0-9]+ bytes|sent a frame longer'
lie data-type 'expected a data frame of [0-9]+ bytes from rank 1 \(.*\), got a op header frame'
echo "$count lies over $transport${tls:+ (UCX_TLS=$tls)}: $((count - failed)) named by every honest rank, $failed not"
[ $failed = 0 ]
