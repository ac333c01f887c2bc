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
# Usage: init_fault_test.sh SEMANTICS_CHECK
set -uo pipefail
check=$1
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
failed=0
# run CASE LIMIT_S VAR=VALUE@RANK...: starts 4 ranks with those extra variables.
run() {
  local name=$1 limit=$2
  shift 2
  local p=$(port) pids=() r
  for r in 0 1 2 3; do
    local extra=()
    for kv in "$@"; do [ "${kv##*@}" = $r ] && extra+=("${kv%@*}"); done
    env RR_RANK=$r RR_SIZE=4 RR_ADDR=127.0.0.1:$p RR_SECRET=init-test RR_TIMEOUT_MS=4000 \
      "${extra[@]}" timeout --kill-after=5 60 "$check" init-report >"$dir/$name.$r" 2>"$dir/$name.err.$r" &
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
fi
exit $failed
