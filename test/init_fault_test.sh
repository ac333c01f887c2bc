#!/usr/bin/env bash
# Init as it fails in real jobs, on 4 ranks started by hand (a launcher would stop the
# others at the first failure): every rank's rr_comm_init must return an error with the
# reason (never kill the process, never RR_ERR_AUTH unless a proof failed), and in time.
#   sockets   rank 1 has RR_SOCKETS_PER_LINK=3, the others 2
#   ifname    rank 2 names an interface that does not exist (RR_SOCKET_IFNAME)
#   secret    rank 2 has another RR_SECRET: rank 0 says so to every rank that joined
#   dies      rank 1 exits between the rendezvous and its ring connections
#   reported  rank 1 exits after it told rank 0 its ring formed, before its links' traits
#   transport rank 1 has RR_TRANSPORT=ucx, the others tcp (with RR_TEST_UCX=1: a UCX build)
# and RR_TRANSPORT=auto's choice (auto_transport.h; with RR_TEST_UCX=1), the job formed on
# every rank over the transport named, and one all-reduce over it right on every rank:
#   auto        every rank auto, on this host: ucx, rank 0 saying why
#   autotcp     rank 2 has RR_TRANSPORT=tcp: tcp
#   autoucx     rank 1 has RR_TRANSPORT=ucx (UCX_TLS=sm): ucx
#   autonoucx   UCX cannot start on rank 3 (UCX_TLS names nothing it has): tcp, rank 3
#               warning with UCX's own words in its line, and no line of UCX's own; the
#               same with UCX_LOG_LEVEL=fatal on rank 3 (autonoucxfatal), where UCX's
#               words are hidden from its output but not from the warning
#   autoshm     rank 3 with a /dev/shm of 128 KiB of its own (a container's is 64 MiB, and
#               UCX's worker takes about 270 KB of it): tcp, rank 3 warning that UCX cannot
#               start, naming /dev/shm (where this host allows a mount namespace)
#   autoname    RR_ADDR=127.0.1.1 (Debian's address for the host's name; the other ranks
#               publish 127.0.0.1, their route to it): ucx, one host
#   autopidns   rank 3 in a pid namespace of its own (unshare, where this host allows it):
#               tcp, rank 0 naming the namespaces
#   autoipcns   rank 3 in an IPC namespace of its own (the same): tcp
# Usage: init_fault_test.sh SEMANTICS_CHECK
set -uo pipefail
check=$1
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 "$(dirname "$0")/free_port.py"; }
failed=0
# run CASE LIMIT_S VAR=VALUE@RANK...: starts 4 ranks with those extra variables; +WORDS@RANK
# runs that rank under the command WORDS (split at spaces).
run() {
  local name=$1 limit=$2
  shift 2
  local p=$(port) pids=() r
  for r in 0 1 2 3; do
    local extra=() wrap=()
    for kv in "$@"; do
      [ "${kv##*@}" = $r ] || continue
      if [ "${kv:0:1}" = + ]; then read -ra wrap <<<"${kv:1:${#kv}-3}"; else extra+=("${kv%@*}"); fi
    done
    env RR_RANK=$r RR_SIZE=4 RR_ADDR=${rank0_ip:-127.0.0.1}:$p RR_SECRET=init-test RR_TIMEOUT_MS=4000 \
      "${extra[@]}" timeout --kill-after=5 60 "${wrap[@]}" "$check" init-report >"$dir/$name.$r" 2>"$dir/$name.err.$r" &
    pids+=($!)
  done
  local start=$(date +%s.%N)
  for r in 0 1 2 3; do wait "${pids[$r]}"; echo $? >"$dir/$name.rc.$r"; done
  echo "== $name ($(python3 -c "print(round($(date +%s.%N) - $start, 2))") s)"
  cat "$dir/$name".[0-3] | sed 's/^/  /'
}
# expect CASE RANKS PATTERN: those ranks exited 0 (no crash) and printed PATTERN.
expect() {
  local name=$1 ranks=$2 pattern=$3 r
  for r in $ranks; do
    local rc=$(cat "$dir/$name.rc.$r")
    if [ "$rc" != 0 ] || ! grep -qE -- "$pattern" "$dir/$name.$r"; then
      echo "FAILED: $name: rank $r (exit $rc) did not say: $pattern"
      tail -3 "$dir/$name.err.$r" | sed 's/^/    /'
      failed=1
    fi
  done
}
run sockets 30 RR_SOCKETS_PER_LINK=3@1
expect sockets "0 1 2 3" "init: invalid argument: .*rank 1 has RR_SOCKETS_PER_LINK=3|RR_SOCKETS_PER_LINK=2, rank 1 has 3"
run ifname 30 RR_SOCKET_IFNAME==nosuch0@2
expect ifname "0 1 2 3" "init: invalid argument: .*no interface that is up matches RR_SOCKET_IFNAME='=nosuch0'"
run secret 30 RR_SECRET=another@2 RR_CONNECT_TIMEOUT_MS=3000@0 RR_CONNECT_TIMEOUT_MS=3000@1 RR_CONNECT_TIMEOUT_MS=3000@3
expect secret "2" "init: authentication failed: .*(HMAC|RR_SECRET)"
expect secret "0 1 3" "init: authentication failed: .*rank 2 did not join.*HMAC"
run dies 30 RR_TEST_EXIT_IN_RING_SETUP=1@1
expect dies "0 2 3" "init: .*rank 1"
[ "$(cat "$dir/dies.rc.1")" = 3 ] || { echo "FAILED: dies: rank 1 did not exit in ring setup"; failed=1; }
run reported 30 RR_TEST_EXIT_IN_RING_SETUP=after-report@1
expect reported "0 2 3" "init: .*rank 1 did not report its ring connections"
[ "$(cat "$dir/reported.rc.1")" = 3 ] || { echo "FAILED: reported: rank 1 did not exit after its report"; failed=1; }
if [ "${RR_TEST_UCX:-0}" = 1 ]; then
  run transport 30 RR_TRANSPORT=ucx@1 UCX_TLS=tcp@1 UCX_NET_DEVICES=lo@1
  expect transport "0 1 2 3" "init: invalid argument: .*rank [0-9] uses the (ucx|tcp) transport, rank [0-9] uses (tcp|ucx)"
  # chose CASE TRANSPORT [RANK-0 PATTERN]: every rank formed the job (its init report says
  # so), logged that it runs over TRANSPORT, and rank 0 logged why, matching the pattern.
  chose() {
    local name=$1 want=$2 why=${3:-} r
    for r in 0 1 2 3; do
      if [ "$(cat "$dir/$name.rc.$r")" != 0 ] || ! grep -q "init: success" "$dir/$name.$r" ||
         ! grep -q "allreduce: right" "$dir/$name.$r" ||
         ! grep -q "RR_TRANSPORT=auto: the job runs over $want\|ring connected over $want" "$dir/$name.err.$r"; then
        echo "FAILED: $name: rank $r did not form the job over $want"
        grep -h "init: \|RR_TRANSPORT=auto\|ring connected" "$dir/$name.$r" "$dir/$name.err.$r" | cut -c1-300 | sed 's/^/    /'
        failed=1
      fi
    done
    if [ -n "$why" ] && ! grep -qE "RR_TRANSPORT=auto: $want, because $why" "$dir/$name.err.0"; then
      echo "FAILED: $name: rank 0 did not log: RR_TRANSPORT=auto: $want, because $why"
      grep -h "RR_TRANSPORT=auto" "$dir/$name.err.0" | sed 's/^/    /'
      failed=1
    fi
  }
  all() { local r; for r in 0 1 2 3; do echo "$1@$r"; done; }
  run auto 30 $(all RR_TRANSPORT=auto) $(all RR_LOG_LEVEL=info)
  chose auto ucx "all 4 ranks share one host \(IP 127.0.0.1, pid and IPC namespaces\)"
  run autotcp 30 $(all RR_TRANSPORT=auto) RR_TRANSPORT=tcp@2 $(all RR_LOG_LEVEL=info)
  chose autotcp tcp "rank 2 runs TCP only"
  run autoucx 30 $(all RR_TRANSPORT=auto) RR_TRANSPORT=ucx@1 UCX_TLS=sm@1 $(all RR_LOG_LEVEL=info)
  chose autoucx ucx "all 4 ranks share one host"
  for name in autonoucx autonoucxfatal; do  # the second with UCX_LOG_LEVEL=fatal on rank 3
    run $name 30 $(all RR_TRANSPORT=auto) UCX_TLS=nosuch@3 $(all RR_LOG_LEVEL=info) \
      $([ $name = autonoucxfatal ] && echo UCX_LOG_LEVEL=fatal@3)
    chose $name tcp "rank 3 runs TCP only"
    grep -q "\[warning\] RR_TRANSPORT=auto: UCX cannot start on rank 3 (.*UCX said: .*no usable transports" \
      "$dir/$name.err.3" || { echo "FAILED: $name: rank 3 did not warn that UCX cannot start, and why"; failed=1; }
    if grep -q "\[UCX \|UCX  *ERROR" "$dir/$name.err.3" "$dir/$name.3"; then
      echo "FAILED: $name: UCX's own lines reached rank 3's output beside its warning:"
      grep -h "\[UCX \|UCX  *ERROR" "$dir/$name.err.3" "$dir/$name.3" | sed 's/^/    /'
      failed=1
    fi
  done
  if unshare --mount --propagation private true 2>/dev/null; then
    # UCX 1.13.1 leaks 600 bytes (one ucs_calloc) when its posix transport cannot get its
    # first receive descriptor: a program of ucp_init, a failing ucp_worker_create and
    # ucp_cleanup alone leaks the same. Under LeakSanitizer that one leak is let pass, for
    # rank 3 of this case only.
    printf 'leak:ucs_calloc\n' >"$dir/ucx-leak.supp"
    run autoshm 30 $(all RR_TRANSPORT=auto) $(all RR_LOG_LEVEL=info) "+$(dirname "$0")/with_small_shm.sh 128K@3" \
      "LSAN_OPTIONS=suppressions=$dir/ucx-leak.supp@3"
    chose autoshm tcp "rank 3 runs TCP only"
    grep -q "\[warning\] RR_TRANSPORT=auto: UCX cannot start on rank 3 (.*/dev/shm" "$dir/autoshm.err.3" ||
      { echo "FAILED: autoshm: rank 3 did not warn that UCX cannot start, naming /dev/shm"; failed=1; }
  else
    echo "== autoshm skipped: unshare --mount is not allowed here"
  fi
  rank0_ip=127.0.1.1 run autoname 30 $(all RR_TRANSPORT=auto) $(all RR_LOG_LEVEL=info)
  chose autoname ucx "all 4 ranks share one host \(loopback addresses, pid and IPC namespaces\)"
  if unshare --pid --fork true 2>/dev/null; then
    run autopidns 30 $(all RR_TRANSPORT=auto) $(all RR_LOG_LEVEL=info) "+unshare --pid --fork@3"
    chose autopidns tcp "ranks 0 and 3 share IP 127.0.0.1 but not pid and IPC namespaces"
  else
    echo "== autopidns skipped: unshare --pid is not allowed here"
  fi
  if unshare --ipc true 2>/dev/null; then
    run autoipcns 30 $(all RR_TRANSPORT=auto) $(all RR_LOG_LEVEL=info) "+unshare --ipc@3"
    chose autoipcns tcp "ranks 0 and 3 share IP 127.0.0.1 but not pid and IPC namespaces"
  else
    echo "== autoipcns skipped: unshare --ipc is not allowed here"
  fi
fi
exit $failed
