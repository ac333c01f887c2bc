#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine, as root:
#   bash scripts/dev.sh bench [ARGS...]   install packages, build, run `ringreduce bench` (4 local ranks)
#   bash scripts/dev.sh test [PARTS...]   install packages, build, run the test suites
#
# The test parts, each built in its own folder and timed:
#   plain   the whole suite (unit, integration, install, faults; gpu, which skips without a
#           GPU) on the normal build, with UCX (the ucx tests: RR_TRANSPORT=ucx over UCX's tcp
#           and shared memory)
#   asan    AddressSanitizer + UndefinedBehaviorSanitizer build (-fno-sanitize-recover=all;
#           with UCX, whose tests run here too; the tsan build is -Ducx=disabled):
#           unit, integration, faults in quick mode, the 'variant' runs (a test family
#           again with a setting forced, e.g. RR_ALGO) but those labelled 'plain-only' (a
#           forced setting on a path run here already; TSan runs a smaller sample), and the
#           10,000-collective soak
#   tsan    ThreadSanitizer build: unit, integration, faults in quick mode (the collectives'
#           largest count 20011), without the "heavy" run (collectives n=5: minutes here),
#           the 128-rank job, the SIGSTOP repeats and the 'variant' runs
#   fuzz    libFuzzer targets built with clang (the handshake, the link's frames, the pass
#           agreement), each run for $FUZZ_SECONDS (default 60), side by side
# With no parts, all four run. The last line is "N passed, N failed" over every part.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}
shift || true

packages=(meson ninja-build pkg-config g++ python3 libasio-dev libspdlog-dev catch2 libcli11-dev
          libssl-dev nlohmann-json3-dev openmpi-bin libopenmpi-dev iperf3 binutils iproute2
          clang libclang-rt-14-dev libucx-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# nvcc is on PATH only in login shells; with it, -Dcuda=auto finds CUDA.
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
prefix=${BUILD_DIR:-build}

# build DIR MESON-OPTIONS... [-- TARGETS...]: configure once, then build (the targets, or
# everything); prints the time it took. A build that fails counts as one failure (its
# output is shown) and returns non-zero.
build() {
  local dir=$1
  shift
  local options=() targets=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
  [ $# -gt 0 ] && shift && targets=("$@")
  local start=$(date +%s)
  if { [ -f "$dir/build.ninja" ] || meson setup "$dir" --buildtype=debugoptimized -Dwerror=true "${options[@]}" >"$dir.setup.log" 2>&1; } &&
     ninja -C "$dir" "${targets[@]}" >"$dir.build.log" 2>&1; then
    echo "== built $dir in $(( $(date +%s) - start )) s"
  else
    echo "FAILED: building $dir"
    tail -40 "$dir.setup.log" "$dir.build.log" 2>/dev/null
    failed=$((failed + 1))
    return 1
  fi
}

passed=0 failed=0 skipped=0
# count DIR: adds the results of DIR's last meson test run to the totals.
count() {
  local line
  line=$(python3 - "$1/meson-logs/testlog.json" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t["result"]
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
        print(f"FAILED: {t['name']} ({r}); the end of its output:", file=sys.stderr)
        for out in (t.get("stdout") or "").splitlines()[-40:]:
            print(f"  | {out}", file=sys.stderr)
print(p, f, s)
PY
)
  read -r p f s <<<"$line"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
}

# suite DIR LABEL MESON-TEST-ARGS...: runs meson test, prints its time, counts its results.
suite() {
  local dir=$1 label=$2
  shift 2
  local start=$(date +%s)
  meson test -C "$dir" --print-errorlogs --no-rebuild "$@" >"$dir/test-output.txt" 2>&1 || true
  grep -E '^ *[0-9]+/[0-9]+ ' "$dir/test-output.txt" | sed 's/^/  /' || true
  echo "== $label: $(( $(date +%s) - start )) s"
  count "$dir"
}

case "$what" in
  bench)
    build "$prefix"
    exec "$prefix/cli/ringreduce" bench "$@"
    ;;
  test)
    suite_start=$(date +%s)
    parts=("$@")
    [ ${#parts[@]} -gt 0 ] || parts=(plain asan tsan fuzz)
    for part in "${parts[@]}"; do
      case $part in
        plain)
          build "$prefix" || continue
          suite "$prefix" "plain suite (unit, integration, install, faults, gpu)" --no-suite soak
          ;;
        asan)
          # CUDA off: nvcc objects are not instrumented, and without a GPU only the
          # stand-in device (always built) can run anyway. With UCX: its tests run here too
          # (UCX objects released on every error path, LeakSanitizer on). -g1: line tables,
          # inlined frames included, all a sanitizer's report uses, in 0.8 of -g's build
          # time. (-O1 built in 0.6, but ran the longest tests 10% slower: no gain.)
          build "$prefix-asan" -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false \
            "-Dcpp_args=-fno-sanitize-recover=all -g1" "-Dc_args=-fno-sanitize-recover=all -g1" || continue
          export RR_TEST_QUICK=1 RR_TEST_TIME_SCALE=3
          suite "$prefix-asan" "ASan+UBSan suite (quick) and soak" --timeout-multiplier 3 \
            --suite unit --suite integration --suite faults --suite soak --no-suite repeat --no-suite scale \
            --no-suite plain-only
          unset RR_TEST_QUICK RR_TEST_TIME_SCALE
          ;;
        tsan)
          # UCX off: the build without it (-Ducx=disabled) is checked here.
          # -g1 as in asan.
          build "$prefix-tsan" -Dcuda=disabled -Ducx=disabled -Db_sanitize=thread -Db_lundef=false \
            -Dcpp_args=-g1 -Dc_args=-g1 || continue
          # RR_TEST_QUICK=2: the collectives' largest count 20011 instead of 100003 (every
          # element costs ~10x under TSan; test/collectives_check.cc says what still holds).
          # Not the fork tests: TSan stops a child that starts threads after a multi-threaded
          # fork (test/meson.build).
          export RR_TEST_QUICK=2 RR_TEST_TIME_SCALE=3 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
          suite "$prefix-tsan" "TSan suite (quick, without the heavy runs)" --timeout-multiplier 3 \
            --suite unit --suite integration --suite faults --no-suite heavy --no-suite repeat --no-suite scale --no-suite variant \
            --no-suite fork
          # A sample of the UCX tests under TSan, in a build with UCX. UCX's memory hooks
          # (libucm patching madvise and mmap) crash in TSan's interceptors at thread start:
          # UCX_MEM_EVENTS=no turns them off (they serve registration caches, unused here).
          # Only what the sample runs is built.
          if build "$prefix-tsan-ucx" -Dcuda=disabled -Ducx=enabled -Db_sanitize=thread -Db_lundef=false \
               -Dcpp_args=-g1 -Dc_args=-g1 -- \
               cli/ringreduce examples/trainer test/mismatch_check test/semantics_check test/fault_check; then
            export UCX_MEM_EVENTS=no
            suite "$prefix-tsan-ucx" "TSan with UCX (a sample of the ucx suite)" --timeout-multiplier 3 \
              "mismatch over ucx (tcp) n=4" "mismatch with a rank one op behind over ucx (shared memory) n=4" \
              "semantics waiters over ucx (tcp) n=3" "semantics destroy-idle over ucx (shared memory) n=2" \
              "trainer n=4 equals n=1 over ucx (shared memory)" \
              "faults over ucx (tcp) end named and survivors recover (n=4)" \
              "faults over ucx (sm queues, no cma) SIGSTOP then resume, buckets untouched (n=4)"
            unset UCX_MEM_EVENTS
          fi
          unset RR_TEST_QUICK RR_TEST_TIME_SCALE TSAN_OPTIONS
          ;;
        fuzz)
          export CC=clang CXX=clang++
          # clang 14 has no _Float16 on x86, so only the fuzz targets are built with it
          build "$prefix-fuzz" -Dfuzz=true -Dtests=false -Dcuda=disabled -- \
            fuzz/fuzz_handshake fuzz/fuzz_link fuzz/fuzz_agreement || { unset CC CXX; continue; }
          unset CC CXX
          # The targets side by side (each one process; three on two cores).
          start=$(date +%s)
          declare -A fuzzing=() corpora=()
          for target in handshake link agreement; do
            corpora[$target]=$(mktemp -d)
            cp fuzz/corpus/$target/* "${corpora[$target]}/"
            "$prefix-fuzz/fuzz/fuzz_$target" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=10 \
              -rss_limit_mb=2048 "${corpora[$target]}" >"$prefix-fuzz/fuzz_$target.log" 2>&1 &
            fuzzing[$target]=$!
          done
          for target in handshake link agreement; do
            if wait "${fuzzing[$target]}"; then
              passed=$((passed + 1))
              echo "  fuzz_$target: $(grep -o 'Done [0-9]* runs' "$prefix-fuzz/fuzz_$target.log" | tail -1), no crash"
            else
              failed=$((failed + 1))
              echo "  FAILED: fuzz_$target"; tail -40 "$prefix-fuzz/fuzz_$target.log"
            fi
            rm -rf "${corpora[$target]}"
          done
          echo "== fuzz_handshake, fuzz_link and fuzz_agreement side by side: $(( $(date +%s) - start )) s"
          ;;
        *)
          echo "unknown test part '$part' (plain, asan, tsan, fuzz)" >&2
          exit 2
          ;;
      esac
    done
    # Skipped tests (the GPU suite where there is no GPU) are named above; the last line is
    # the form CI reads.
    [ $skipped -gt 0 ] && echo "$skipped skipped (exit 77: see the lines marked SKIP above)"
    echo "== every part, builds included: $(( ($(date +%s) - suite_start) / 60 )) min $(( ($(date +%s) - suite_start) % 60 )) s"
    echo "$passed passed, $failed failed"
    [ $failed -eq 0 ]
    ;;
  *)
    echo "usage: $0 bench [ARGS...] | test [plain|asan|tsan|fuzz]..." >&2
    exit 2
    ;;
esac
