#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine, as root:
#   bash scripts/dev.sh bench [ARGS...]   install packages, build, run `ringreduce bench` (4 local ranks)
#   bash scripts/dev.sh test              install packages, build, run the whole test suite
# The test command ends with the line "N passed, N failed" computed from meson's results.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}
shift || true

packages=(meson ninja-build pkg-config g++ python3 libasio-dev libspdlog-dev catch2 libcli11-dev
          libssl-dev nlohmann-json3-dev openmpi-bin libopenmpi-dev iperf3 binutils)
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
build=${BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized -Dwerror=true
fi
start=$(date +%s)
ninja -C "$build"
echo "== build took $(( $(date +%s) - start )) s"

case "$what" in
  bench)
    exec "$build/cli/ringreduce" bench "$@"
    ;;
  test)
    start=$(date +%s)
    set +e
    meson test -C "$build" --print-errorlogs --no-rebuild "$@"
    status=$?
    set -e
    echo "== tests took $(( $(date +%s) - start )) s"
    python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys, collections
passed = failed = skipped = 0
suites = collections.defaultdict(float)
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t["result"]
    for s in t.get("suite", []):
        suites[s.split(":")[-1]] += t.get("duration", 0)
    if r in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif r == "SKIP":
        skipped += 1
    else:
        failed += 1
        print(f"FAILED: {t['name']} ({r})")
for s, d in sorted(suites.items()):
    print(f"suite {s}: {d:.1f} s")
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(1 if failed else 0)
PY
    py=$?
    [ $status -eq 0 ] && [ $py -eq 0 ]
    ;;
  *)
    echo "usage: $0 bench [ARGS...] | test" >&2
    exit 2
    ;;
esac
