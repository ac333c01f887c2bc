#!/usr/bin/env bash
# Where the ranks are decides auto's thresholds (engine/setup/config.h, Config::Span): 4 ranks,
# each in a network namespace this test creates (emulated hosts, 10.233.0.0/24 exists only
# inside them), must each find that the job spans hosts (recursive doubling up to 16 KiB,
# halving-doubling above) and all-reduce correctly across the threshold; the same 4 ranks
# on loopback must find one host (32 KiB), also with rank 0 at 127.0.1.1 while the others
# publish 127.0.0.1. A rank that found otherwise than the others
# would send another algorithm in its op header and the job would fail, named.
# Needs root and iproute2; the emulated half is skipped (exit 77) without them.
# Usage: netns_span_test.sh RINGREDUCE
set -uo pipefail
rr=$1
dir=$(mktemp -d)
fail() { echo "FAILED: $*"; exit 1; }
check_out() {  # check_out WHAT FILE: every size present, no element wrong
  local sizes
  sizes=$(awk '/^ +[0-9]/ && $9 == 0 {print $1}' "$2" | tr '\n' ' ')
  [ "$sizes" = "4096 8192 16384 32768 65536 " ] || { cat "$2"; fail "$1: sizes checked right: '$sizes'"; }
}

# One host: loopback.
RR_LOG_LEVEL=info timeout 120 "$rr" bench -N 4 -b 4K -e 64K -f 2 -n 20 -w 2 >"$dir/lo" 2>&1 ||
  { cat "$dir/lo"; fail "loopback bench exited non-zero"; }
n=$(grep -c "the job's ranks share one host: auto takes recursive doubling up to 32 KiB" "$dir/lo")
[ "$n" = 4 ] || { cat "$dir/lo"; fail "loopback: $n of 4 ranks found one host"; }
check_out loopback "$dir/lo"
echo "loopback: 4 of 4 ranks found one host (recursive doubling up to 32 KiB); 4-64 KiB right"

# ranks NAME ADDR NETNS-TAG PATTERN WHAT: 4 ranks of `bench`, rank 0 at ADDR, each in the
# namespace NETNS-TAG-r (none where the tag is empty); each must exit 0 and log PATTERN.
ranks() {
  local name=$1 addr=$2 ns=$3 pattern=$4 what=$5 pids=() r
  for r in 0 1 2 3; do
    local wrap=()
    [ -z "$ns" ] || wrap=(ip netns exec "$ns-$r")
    "${wrap[@]}" env RR_RANK=$r RR_SIZE=4 RR_ADDR=$addr RR_SECRET=span-test RR_LOG_LEVEL=info \
      RR_TIMEOUT_MS=20000 timeout --kill-after=5 120 "$rr" bench -b 4K -e 64K -f 2 -n 20 -w 2 >"$dir/$name.$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1 2 3; do wait "${pids[$r]}" || { cat "$dir/$name.$r"; fail "$what: rank $r exited non-zero"; }; done
  for r in 0 1 2 3; do
    grep -q "$pattern" "$dir/$name.$r" || { cat "$dir/$name.$r"; fail "$what: rank $r did not log: $pattern"; }
  done
  check_out "$what" "$dir/$name.0"
}

# One host, rank 0 at 127.0.1.1 (Debian's address for the host's name): the other ranks
# publish 127.0.0.1, their route to it, and are still on rank 0's host.
p=$(python3 "$(dirname "$0")/free_port.py")
ranks name 127.0.1.1:$p "" "the job's ranks share one host: auto takes recursive doubling up to 32 KiB" \
  "RR_ADDR=127.0.1.1"
echo "RR_ADDR=127.0.1.1: 4 of 4 ranks found one host (127.0.1.1 and 127.0.0.1 both loopback); 4-64 KiB right"

source "$(dirname "$0")/../scripts/netns_hosts.sh"
tag=rrs$$
hosts_for_test "$tag" 4 10.233.0 "$dir"
ranks ns 10.233.0.1:29500 "$tag" "the job's ranks are on more than one host: auto takes recursive doubling up to 16 KiB" \
  "emulated hosts"
echo "emulated hosts: 4 of 4 ranks found more than one host (recursive doubling up to 16 KiB, halving-doubling above); 4-64 KiB right"
