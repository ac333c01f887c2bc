#!/usr/bin/env bash
# The CLI as a user meets it: bench tables and JSON with #wrong = 0 for every collective,
# `run` prefixing lines and passing on the status of a failed rank, binding ranks to CPUs,
# `info`, `bench --device`.
set -euo pipefail
rr=$1
t() { timeout --kill-after=5 120 "$@"; }
info=$(t "$rr" info)
echo "$info"
grep -q "host reducer" <<<"$info"
for c in allreduce broadcast allgather reduce_scatter; do
  out=$(t "$rr" bench -N 3 --collective "$c" -b 1K -e 1M -f 8 -n 2 -w 1 -d int32 -o max)
  echo "$out"
  grep -q "# Out of bounds values : 0 OK" <<<"$out"
  [ "$(grep -c '^ ' <<<"$out")" = 4 ]
done
# Sizes that round to one element count are one row: from 0 bytes by doubling, floats give
# 0, 4, 8, 16 (1 and 2 bytes are 0 elements), each once.
out=$(t "$rr" bench -N 2 -b 0 -e 16 -f 2 -n 2 -w 1)
[ "$(grep '^ ' <<<"$out" | awk '{print $1}' | tr '\n' ' ')" = "0 4 8 16 " ] ||
  { echo "$out"; echo "bench -b 0 -e 16 -f 2: not one row each for 0, 4, 8 and 16 bytes"; exit 1; }
json=$(t "$rr" bench -N 2 -b 4K -e 64K -f 4 -n 2 -w 0 -d bfloat16 -o avg --format json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["wrong"]==0 and len(d["results"])==3 and d["results"][0]["busbw_gbs"]>0, d' "$json"
out=$(t "$rr" run -n 2 -- sh -c 'echo hello from $RR_RANK of $RR_SIZE')
grep -qx '\[0\] hello from 0 of 2' <<<"$out"
grep -qx '\[1\] hello from 1 of 2' <<<"$out"
# run holds RR_ADDR's port for the job without listening (cli/launcher.cc, reservePort): a
# plain bind to it fails while one with SO_REUSEADDR that listens, as rank 0's listener,
# succeeds; and no rank inherits the launcher's socket.
out=$(t "$rr" run -n 1 -- python3 -c '
import os, socket
port = int(os.environ["RR_ADDR"].rsplit(":", 1)[1])
plain = socket.socket()
try:
    plain.bind(("127.0.0.1", port))
    print("plain bind succeeded")
    plain.close()  # the port was not held: let the listener below have it
except OSError as e:
    print("plain bind refused:", e.strerror)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(1)
mine = {plain.fileno(), listener.fileno()}  # -1 for plain where it was closed
def target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the fd listdir itself held
        return ""
inherited = [fd for fd in os.listdir("/proc/self/fd") if int(fd) not in mine and target(fd).startswith("socket:")]
print("listening; sockets inherited:", len(inherited))')
grep -qx '\[0\] plain bind refused: Address already in use' <<<"$out" &&
  grep -qx '\[0\] listening; sockets inherited: 0' <<<"$out" ||
  { echo "$out"; echo "run did not hold its rendezvous port as it should"; exit 1; }
# Where no port is left to hold, run says so and which call failed, and starts no rank: in a
# network namespace of the test's own whose local port range (40000-40001) is all bound.
ns=rr-cli-$$
if ip netns add $ns 2>/dev/null; then
  set +e
  out=$(t ip netns exec $ns sh -c 'ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range="40000 40001" &&
    exec python3 -c "
import socket, subprocess, sys
held = []
for port in (40000, 40001):
    s = socket.socket(); s.bind((\"127.0.0.1\", port)); held.append(s)
r = subprocess.run([sys.argv[1], \"run\", \"-n\", \"1\", \"--\", \"echo\", \"a rank started\"], capture_output=True, text=True)
print(\"status\", r.returncode); print(r.stdout + r.stderr, end=\"\")" "$0"' "$rr" 2>&1)
  set -e
  ip netns del $ns
  [ "$(head -1 <<<"$out")" = "status 1" ] &&
    grep -qx "ringreduce run: a port on 127.0.0.1 for the rendezvous: bind to 127.0.0.1:0: Address already in use" <<<"$out" &&
    ! grep -q "a rank started" <<<"$out" ||
    { echo "$out"; echo "run with no port left: not status 1 naming the bind"; exit 1; }
else
  echo "== run with no port left skipped: ip netns add is not allowed here"
fi
# --bind-to: core puts rank r on the r-th CPU this process may use; run's default leaves
# each rank every CPU; more ranks than CPUs with core is a usage error naming both.
mine=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
first=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[0])')
out=$(t "$rr" run -n 1 --bind-to core -- python3 -c 'import os; print(sorted(os.sched_getaffinity(0)))')
grep -qx "\[0\] \[$first\]" <<<"$out" || { echo "$out"; echo "rank 0 not bound to CPU $first"; exit 1; }
out=$(t "$rr" run -n 1 -- python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
grep -qx "\[0\] $mine" <<<"$out" || { echo "$out"; echo "run bound a rank by default"; exit 1; }
cpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
set +e
err=$(t "$rr" run -n $((cpus + 1)) --bind-to core -- true 2>&1); status=$?
set -e
[ $status = 2 ] && grep -q "needs a CPU per rank: $((cpus + 1)) ranks, $cpus CPUs allowed" <<<"$err" ||
  { echo "$err"; echo "--bind-to core with too many ranks: status $status"; exit 1; }
set +e
start=$(date +%s)
t "$rr" run -n 3 -- sh -c 'if [ "$RR_RANK" = 1 ]; then exit 7; fi; sleep 60'
status=$?
set -e
[ $status = 7 ] || { echo "run must exit with the failed rank's status, got $status"; exit 1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "run did not stop the other ranks"; exit 1; }
if t "$rr" bench -N 2 -d notatype 2>/dev/null; then echo "bad dtype accepted"; exit 1; fi
# --device: checked and timed on a GPU where there is one; elsewhere a clear error naming
# the rank and CUDA's (or the build's) reason, and exit status 1.
set +e
out=$(t "$rr" bench -N 2 -b 1M -e 1M -n 1 -w 0 --device 2>&1)
status=$?
set -e
echo "$out"
if [ $status = 0 ]; then
  grep -q "# Out of bounds values : 0 OK" <<<"$out"
else
  [ $status = 1 ] || { echo "bench --device exited with $status"; exit 1; }
  grep -qE 'bench: --device on rank [01]: .*(\(cuda[A-Za-z]+\)|no CUDA support)' <<<"$out"
fi
# A careless user: sizes that are not sizes, sizes that do not fit, unknown flags; each
# named, exit 2, before any rank starts.
expect_usage() {  # expect_usage PATTERN COMMAND...: exit 2 and PATTERN on stderr
  local pattern=$1 out status
  shift
  set +e
  out=$(t "$@" 2>&1)
  status=$?
  set -e
  echo "$out" | head -3
  [ $status = 2 ] || { echo "'$*' exited with $status, expected 2"; exit 1; }
  grep -qE -- "$pattern" <<<"$out" || { echo "'$*' did not say: $pattern"; exit 1; }
}
expect_usage "-b/--minbytes: 'abc' is not a size" "$rr" bench -N 2 -b abc
expect_usage "-b/--minbytes: 'nan' is not a size" "$rr" bench -N 2 -b nan
expect_usage "-e/--maxbytes: '1e30' is not a size" "$rr" bench -N 2 -e 1e30
expect_usage "-e/--maxbytes 100G needs about .* GiB .* available" "$rr" bench -N 2 -e 100G
expect_usage "unknown option '-x'" "$rr" run -x 3 true
expect_usage "--bogus" "$rr" bench --bogus
expect_usage "-r/--root 5 is not one of the 2 ranks started here \(-N 2; valid: 0..1\)" "$rr" bench --collective broadcast -r 5 -N 2
expect_usage "-r/--root -1 is not a rank" "$rr" bench --collective broadcast -r -1 -N 2
# bench -N given explicitly wins over a stray launcher variable; without -N the variable
# alone is named.
out=$(RANK=5 t "$rr" bench -N 2 -b 1K -e 1K -n 1 -w 0)
grep -q "# Out of bounds values : 0 OK" <<<"$out"
set +e
out=$(RANK=5 t "$rr" bench -b 1K -e 1K -n 1 -w 0 2>&1)
status=$?
set -e
[ $status != 0 ] && grep -q "RANK=5 is set but WORLD_SIZE is not" <<<"$out" ||
  { echo "a lone RANK without -N was not named: $out"; exit 1; }
# run: a rank's children end with the job (process groups); `| head -1` orphans nothing.
alive() {  # alive PID: running (a zombie that no init reaped here does not count)
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}
dir=$(mktemp -d)
set +e
t "$rr" run -n 2 -- sh -c 'sleep 300 & echo $! > '"$dir"'/child.$RR_RANK
  if [ "$RR_RANK" = 1 ]; then sleep 1; exit 3; fi; wait'
status=$?
set -e
[ $status = 3 ] || { echo "run exited with $status, expected rank 1's 3"; exit 1; }
for r in 0 1; do
  if alive "$(cat "$dir/child.$r")"; then echo "rank $r's child outlived the job"; exit 1; fi
done
t "$rr" run -n 2 -- sh -c 'for i in $(seq 50); do echo line $i; sleep 0.02; done; echo $$ > '"$dir"'/done.$RR_RANK' | head -1
for r in 0 1; do
  [ -s "$dir/done.$r" ] || { echo "rank $r did not finish after | head -1"; exit 1; }
  if alive "$(cat "$dir/done.$r")"; then echo "rank $r outlived the job"; exit 1; fi
done
rm -rf "$dir"
# RR_PHASES=1: every rank prints where a collective's time went, per bucket size. The spin
# is on by default while this host's ranks fit the cores they share (also when bench -N
# binds each of them to one core), off (logged) when they outnumber them (one core here:
# taskset), and RR_SPIN_US is checked like every variable.
out=$(RR_PHASES=1 RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 4K -e 16K -f 4 -n 30 -w 2 2>&1)
for r in 0 1; do
  grep -q "ringreduce phases, rank $r of 2" <<<"$out" || { echo "$out"; echo "no phases from rank $r"; exit 1; }
done
[ "$(grep -cE '^ +(4096|16384) \| +[0-9.]+ \|' <<<"$out")" = 4 ] || { echo "$out"; echo "phase rows missing"; exit 1; }
grep -q "RR_SPIN_US=200 (default)" <<<"$out" || [ "$(nproc)" -lt 2 ] || { echo "spin not on by default"; exit 1; }
out=$(RR_LOG_LEVEL=info t taskset -c 0 "$rr" bench -N 2 -b 4K -e 4K -n 5 -w 1 2>&1)
grep -q "RR_SPIN_US=0 (off: RR_LOCAL_SIZE=2 ranks on this host outnumber RR_LOCAL_CPUS=1)" <<<"$out" ||
  { echo "$out"; echo "spin not off with 2 ranks on 1 core"; exit 1; }
grep -q "# Out of bounds values : 0 OK" <<<"$out"
out=$(RR_SPIN_US=-1 t "$rr" bench -N 2 -b 4K -e 4K -n 1 2>&1) && { echo "RR_SPIN_US=-1 accepted"; exit 1; }
grep -q "RR_SPIN_US=-1 is out of range \[0, 1000000\]" <<<"$out" || { echo "$out"; exit 1; }
out=$(RR_GPU_FLAG_OPS=poll t "$rr" bench -N 2 -b 4K -e 4K -n 1 2>&1) && { echo "RR_GPU_FLAG_OPS=poll accepted"; exit 1; }
grep -q "RR_GPU_FLAG_OPS='poll' is not auto or kernels" <<<"$out" || { echo "$out"; exit 1; }
out=$(RR_GPU_PROGRAM=yes t "$rr" bench -N 2 -b 4K -e 4K -n 1 2>&1) && { echo "RR_GPU_PROGRAM=yes accepted"; exit 1; }
grep -q "RR_GPU_PROGRAM='yes' is not 0 or 1" <<<"$out" || { echo "$out"; exit 1; }
# Over UCX's shared memory, where UCX lists cma (the kernel lets ranks read each other), the
# receiver reads frames of 64 KiB and more from the sender's memory: the links say so, the
# job cuts segments of 128 KiB and more, and the results are checked; without cma in
# UCX_TLS, neither.
if [ "${RR_TRANSPORT:-}" = ucx ] && [ "${UCX_TLS:-}" = sm ] && grep -q "transports .*cma" <<<"$info"; then
  large="every link of the job reads its peers' frames"
  out=$(RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 1M -e 4M -f 4 -n 3 -w 1 2>&1)
  grep -q "read from the sender's memory" <<<"$out" || { echo "$out"; echo "no pull over UCX's shared memory"; exit 1; }
  [ "$(grep -c "$large" <<<"$out")" = 2 ] || { echo "$out"; echo "larger segments not on both ranks"; exit 1; }
  grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; exit 1; }
  # UCX's shared-memory FIFO is the transport's 16 elements unless the user sets a size;
  # a name UCX does not take would be "invalid configuration" in its warnings.
  fifo="UCX's shared-memory FIFO has 16 elements"
  [ "$(grep -c "$fifo" <<<"$out")" = 2 ] || { echo "$out"; echo "FIFO size not on both ranks"; exit 1; }
  ! grep -q "UCX *WARN" <<<"$out" || { echo "$out"; echo "UCX warned"; exit 1; }
  out=$(UCX_MM_FIFO_SIZE=32 RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 4K -e 64K -f 4 -n 3 -w 1 2>&1)
  ! grep -q "$fifo\|UCX *WARN" <<<"$out" || { echo "$out"; echo "the user's UCX_MM_FIFO_SIZE overridden"; exit 1; }
  grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; exit 1; }
  # Its receive buffers grow 32 at a time (268 KB) where UCX's default, 512 (4.3 MB in
  # /dev/shm per rank), left a 1 MiB /dev/shm no room for even one rank: two ranks run in
  # one now (where this host lets the test mount a tmpfs of its own), and a user's size wins.
  grow="UCX's shared-memory receive buffers grow 32 at a time"
  set +e
  out=$(RR_LOG_LEVEL=info t "$(dirname "$0")/with_small_shm.sh" 1M "$rr" bench -N 2 -b 4K -e 1M -f 16 -n 3 -w 1 2>&1)
  status=$?
  set -e
  case $status in
  77) echo "== a 1 MiB /dev/shm skipped: unshare --mount is not allowed here" ;;
  0) [ "$(grep -c "$grow" <<<"$out")" = 2 ] || { echo "$out"; echo "receive buffers' growth not on both ranks"; exit 1; }
     grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; exit 1; } ;;
  *) echo "$out"; echo "two ranks over UCX's shared memory in a 1 MiB /dev/shm failed"; exit 1 ;;
  esac
  # Where the pool must grow and /dev/shm has no room (4 buffers at a time in 384 KiB), UCX
  # logs its error and takes nothing more in: the collective fails at once, naming /dev/shm
  # and the rank, not at RR_TIMEOUT_MS as a stall.
  # The same where the user silenced UCX (UCX_LOG_LEVEL=fatal): its error lines still fail
  # the collective at once, and none of them is printed. (warn is UCX's default level.)
  if [ $status != 77 ]; then
    for level in warn fatal; do
      set +e
      out=$(UCX_LOG_LEVEL=$level UCX_POSIX_RX_BUFS_GROW=4 UCX_TLS=posix,self RR_TIMEOUT_MS=100000 \
        t "$(dirname "$0")/with_small_shm.sh" 384K "$rr" bench -N 2 -b 1K -e 64K -f 4 -n 200 -w 5 2>&1)
      status=$?
      set -e
      [ $status = 1 ] && grep -q "failed: system error: UCX on rank [01] could not grow its buffers.*/dev/shm" <<<"$out" &&
        ! grep -q "no progress for" <<<"$out" && { [ $level = warn ] || ! grep -q "\[UCX \|UCX  *ERROR" <<<"$out"; } ||
        { echo "$out"; echo "UCX_LOG_LEVEL=$level, a full /dev/shm when the receive pool grows: status $status, not our error alone at once"; exit 1; }
    done
  fi
  # The same over sysv, whose segments the kernel bounds (kernel.shmall: 120 pages in an IPC
  # namespace of the test's own), naming those limits.
  if unshare --ipc sysctl -qw kernel.shmall=120 2>/dev/null; then
    set +e
    out=$(UCX_SYSV_RX_BUFS_GROW=4 UCX_TLS=sysv,self RR_TIMEOUT_MS=100000 t unshare --ipc sh -c \
      'sysctl -qw kernel.shmall=120 && exec "$0" bench -N 2 -b 1K -e 64K -f 4 -n 200 -w 5' "$rr" 2>&1)
    status=$?
    set -e
    [ $status = 1 ] && grep -q "failed: system error: UCX on rank [01] could not grow its buffers.*kernel.shmall" <<<"$out" &&
      ! grep -q "no progress for" <<<"$out" ||
      { echo "$out"; echo "sysv over its kernel limit when the receive pool grows: status $status, not UCX's error at once"; exit 1; }
  else
    echo "== sysv under kernel.shmall skipped: unshare --ipc or the sysctl is not allowed here"
  fi
  out=$(UCX_POSIX_RX_BUFS_GROW=64 UCX_SYSV_RX_BUFS_GROW=64 RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 4K -e 4K -n 3 -w 1 2>&1)
  ! grep -q "$grow\|UCX *WARN" <<<"$out" || { echo "$out"; echo "the user's UCX_*_RX_BUFS_GROW overridden"; exit 1; }
  grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; exit 1; }
  out=$(UCX_TLS=posix,sysv,self RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 1M -e 1M -n 2 -w 1 2>&1)
  ! grep -q "read from the sender's memory\|$large" <<<"$out" || { echo "$out"; echo "a pull without cma in UCX_TLS"; exit 1; }
  grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; exit 1; }
  # Rank 7 of 8 without cma: its links (to ranks 6 and 0, and to its partners 6, 5 and 3)
  # send eagerly, the others pull, so ranks 1, 2 and 4, whose links all pull, must cut a bucket
  # as every other rank does, or the frames' lengths would not match (1 and 2 MiB: 64 KiB
  # segments, not 128), ring and halving-doubling.
  for a in ring hd; do
    out=$(RR_ALGO=$a RR_LOG_LEVEL=info t "$rr" run -n 8 -- sh -c \
      'if [ "$RR_RANK" = 7 ]; then export UCX_TLS=posix,sysv,self; fi; exec "$0" bench -b 1M -e 4M -f 2 -n 2 -w 1' "$rr" 2>&1) ||
      { echo "$out"; echo "mixed links, RR_ALGO=$a: the job failed"; exit 1; }
    grep -q "read from the sender's memory" <<<"$out" || { echo "$out"; echo "no pull between ranks 0-6"; exit 1; }
    ! grep -q "$large" <<<"$out" || { echo "$out"; echo "larger segments with eager links"; exit 1; }
    grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "mixed links, RR_ALGO=$a"; exit 1; }
  done
fi
# Over UCX's tcp the transport picks both tcp segment sizes, or neither: a user who sets one
# gets UCX's default for the other (before, the transport's 1 MiB beside a user's 2 MiB broke
# UCX's rule and init failed), and a pair UCX refuses is named with the UCX_* variables.
# With the transport's own sizes (256 KiB fragments) every link says so and ring passes cut
# segments that fit one fragment (224 KiB); a user's size, on any one rank, turns that off
# for the whole job, which must still cut every bucket alike (the frames' lengths match).
if [ "${RR_TRANSPORT:-}" = ucx ] && [ "${UCX_TLS:-}" = tcp ]; then
  frag="ring passes cut segments of at most 224 KiB"
  out=$(RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 1M -e 4M -f 4 -n 3 -w 1 2>&1)
  [ "$(grep -c "$frag" <<<"$out")" = 2 ] || { echo "$out"; echo "one-fragment segments not on both ranks"; exit 1; }
  grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; exit 1; }
  out=$(UCX_TCP_RX_SEG_SIZE=32K RR_LOG_LEVEL=info t "$rr" bench -N 2 -b 1M -e 1M -n 2 -w 1 2>&1)
  grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "UCX_TCP_RX_SEG_SIZE alone"; exit 1; }
  ! grep -q "$frag" <<<"$out" || { echo "$out"; echo "one-fragment segments with the user's sizes"; exit 1; }
  for a in ring hd; do
    out=$(RR_ALGO=$a RR_LOG_LEVEL=info t "$rr" run -n 4 -- sh -c \
      'if [ "$RR_RANK" = 3 ]; then export UCX_TCP_TX_SEG_SIZE=256K UCX_TCP_RX_SEG_SIZE=1M; fi; exec "$0" bench -b 1M -e 4M -f 2 -n 2 -w 1' "$rr" 2>&1) ||
      { echo "$out"; echo "rank 3 with its own tcp sizes, RR_ALGO=$a: the job failed"; exit 1; }
    ! grep -q "$frag" <<<"$out" || { echo "$out"; echo "one-fragment segments beside a rank without"; exit 1; }
    grep -q "# Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "mixed tcp sizes, RR_ALGO=$a"; exit 1; }
  done
  # UCX's reason is in its line above; where UCX_LOG_LEVEL=fatal hides that line, in the error.
  for level in warn fatal; do
    out=$(UCX_LOG_LEVEL=$level UCX_TCP_TX_SEG_SIZE=2M t "$rr" bench -N 2 -b 1M -e 1M -n 2 -w 1 2>&1) &&
      { echo "TX 2M over RX 64K accepted"; exit 1; }
    why="UCX's reason in its log line above"
    [ $level = fatal ] && why="UCX said: RX segment size ([0-9]*) must be >= TX segment size ([0-9]*)"
    grep -q "ucp_worker_create failed: Invalid parameter ($why; the UCX_\* variables: .*UCX_TCP_TX_SEG_SIZE=2M" <<<"$out" &&
      { [ $level = warn ] || ! grep -q "\[UCX \|UCX  *ERROR" <<<"$out"; } ||
      { echo "$out"; echo "UCX_LOG_LEVEL=$level: a refused UCX setting not named, or UCX's reason not given once"; exit 1; }
  done
fi
# UCX's own log lines (here its warning about a UCX_* variable it does not know) go to stderr
# with the rank, never into stdout (bench's table, or the output of a program that embeds the
# library); with UCX_LOG_FILE set they go where it says, as UCX does. A UCX that cannot start
# (UCX_TLS naming nothing it has) gives its reason in its line, or under UCX_LOG_LEVEL=fatal,
# which hides that line, in the error that every rank hears.
if [ "${RR_TRANSPORT:-}" = ucx ]; then
  for level in warn fatal; do
    out=$(UCX_LOG_LEVEL=$level UCX_TLS=nosuch t "$rr" bench -N 2 -b 4K -e 4K -n 2 -w 1 2>&1) &&
      { echo "$out"; echo "UCX_TLS=nosuch: the job ran"; exit 1; }
    said="no usable transports/devices (asked nosuch on [^)]*)"  # all devices, or UCX_NET_DEVICES
    if [ $level = warn ]; then
      grep -q "\[UCX ERROR\] ucp_context.c:[0-9]* $said" <<<"$out" &&
        grep -q "ucp_init (check UCX_TLS and UCX_NET_DEVICES) failed: No such device$" <<<"$out"
    else
      grep -q "rank 1 cannot join: UCX: ucp_init (check UCX_TLS and UCX_NET_DEVICES) failed: No such device (UCX said: $said)" <<<"$out" &&
        ! grep -q "\[UCX " <<<"$out"  # rank 0 relays it: it starts UCX only once every rank arrived
    fi || { echo "$out"; echo "UCX_LOG_LEVEL=$level, UCX_TLS=nosuch: UCX's reason not given once"; exit 1; }
  done
  logs=$(mktemp -d)
  UCX_RR_NO_SUCH_VARIABLE=1 t "$rr" bench -N 2 -b 4K -e 4K -n 2 -w 1 >"$logs/out" 2>"$logs/err" ||
    { cat "$logs/out" "$logs/err"; echo "bench with an unknown UCX variable failed"; exit 1; }
  ! grep -q "UCX" "$logs/out" || { cat "$logs/out"; echo "UCX wrote to stdout"; exit 1; }
  grep -q "# Out of bounds values : 0 OK" "$logs/out" || { cat "$logs/out"; exit 1; }
  for r in 0 1; do
    grep -q "^\[[0-9:.]*\] \[ringreduce rank $r\] \[UCX WARN\] parser.c:[0-9]* unused env variable: UCX_RR_NO_SUCH_VARIABLE" "$logs/err" ||
      { cat "$logs/err"; echo "UCX's warning not on stderr with rank $r"; exit 1; }
  done
  UCX_LOG_FILE="$logs/ucx.%p.log" UCX_RR_NO_SUCH_VARIABLE=1 t "$rr" bench -N 2 -b 4K -e 4K -n 2 -w 1 >"$logs/out" 2>"$logs/err" ||
    { cat "$logs/out" "$logs/err"; echo "bench with UCX_LOG_FILE failed"; exit 1; }
  ! grep -q "UCX_RR_NO_SUCH_VARIABLE" "$logs/out" "$logs/err" || { cat "$logs/out" "$logs/err"; echo "UCX_LOG_FILE not honoured"; exit 1; }
  [ "$(grep -l "UCX_RR_NO_SUCH_VARIABLE" "$logs"/ucx.*.log | wc -l)" = 2 ] ||
    { ls -l "$logs"; cat "$logs"/ucx.*.log; echo "UCX's warning not in UCX_LOG_FILE for both ranks"; exit 1; }
  rm -rf "$logs"
fi
echo "cli ok"
