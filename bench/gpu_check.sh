#!/usr/bin/env bash
# Every GPU check of ringreduce in one script, for a machine with an NVIDIA GPU that can
# install nothing (docs/gpu.md, "Checking on a real GPU").
#
#   bash bench/gpu_check.sh --bundle [BUILD_DIR]   here: put the built binaries, the shared
#       libraries they load that are not glibc or CUDA's, and the headers a build there
#       would need, into gpu-bundle/ (ignored by git; carry it to the GPU machine)
#   bash bench/gpu_check.sh OUT_DIR                there: run everything, results under OUT_DIR
#
# On the GPU machine it first prints the OS, glibc, driver, GPU and nvcc, so a failed first
# try still says what the second needs. Then it tries the carried binaries (with
# LD_LIBRARY_PATH); if they do not start there, it compiles the same programs from this
# repository with the local nvcc and g++ and the carried headers (spdlog and fmt header-only,
# CLI11, nlohmann/json, OpenSSL's headers linked to the machine's libssl.so.3 or the
# carried one). Then, each step with a time limit of at most 90 s and RR_TIMEOUT_MS=20000
# (so a hang reports itself as a named timeout, and the rest of the check still runs):
#   info                ringreduce info (GPUs, and how a caller's stream waits: the mechanism)
#   kernels             bench/gpu_kernels: reduce-and-copy-out GB/s for 256 MiB fp32, fp16,
#                       bf16 next to cudaMemcpy device-to-device and cublasSaxpy
#   collectives n=1/2/4 test/collectives_check --device: every collective, dtype and op on
#                       GPU buffers, counts 0, 1, 7, 1 Mi + 3, in place and out of place
#   stream n=1/2/4      test/gpu_stream_check: ordering on a user stream and on stream NULL,
#                       and (n > 1) a compute kernel on another stream while an all-reduce
#                       is in flight (its time within 20% of its time alone)
#   bench host/device   ringreduce bench -N 2, 4 MiB..256 MiB, host buffers then GPU buffers;
#                       the device/host busbw ratio per size goes into the summary
#   ring n=2            the collectives again with RR_ALGO=ring (auto takes rd for the small
#                       counts at 2 ranks; more than 2 ranks take the ring on GPU buffers)
#   ucx ...             where the binaries have the UCX transport: the collectives (n = 2, 4),
#                       stream ordering (n = 2) and the host/device bench over RR_TRANSPORT=ucx
#                       with UCX_TLS=self,sm (shared memory; UCX's modules are carried in
#                       lib/ucx, where UCX looks beside its own libucs)
#   bench n=4           the host/device bench at 4 ranks (the ring on GPU buffers)
#   bench seg           the host/device bench at n = 2, 4 and 16 MiB, with 256 KiB and 4 MiB
#                       segments (RR_SEGMENT_BYTES; 1 MiB is the default); 64 KiB-4 MiB
#                       host/device, and RR_PHASES=1 at 64 KiB and 4 MiB (where the time goes)
#   flag kernels        the same phases, the device bench (n = 2, 4), the collectives and
#                       stream ordering with RR_GPU_FLAG_OPS=kernels (one-thread kernels in
#                       place of the stream memory operations)
#   program             RR_GPU_PROGRAM=1 (one kernel per collective): collectives and
#                       stream ordering (n = 2, 4), the device bench (n = 2, 4; from 64 KiB at
#                       n = 2) and its phases, collectives over UCX sm, memcheck (n = 2)
#   mps                 where nvidia-cuda-mps-control exists: the device phases and bench
#                       (n = 2, 4; also with RR_GPU_PROGRAM=1) and stream ordering (n = 2)
#                       under an MPS daemon of its own,
#                       stopped at the end (ranks sharing the GPU without time-slicing)
#   stream eager        stream ordering at n = 2, 4 with CUDA_MODULE_LOADING=EAGER
#   memcheck            compute-sanitizer --tool memcheck over the kernel benchmark, then
#                       over the collectives at n = 2
# RR_TIMEOUT_MS (default 20000) sets each collective's time limit; the steps' own limits stay.
# RR_GPU_STEPS: a regular expression (bash =~, anchored) of the step names to run; the others
# are left out (a rerun of what failed). RR_GPU_BUDGET_S: seconds for the whole check; a step that would start with under 10 s left
# is skipped and the others' limits shrink to fit, so the results are always packed.
# OUT_DIR ends with at most four files: gpu_check.log (everything printed), summary.txt (one
# line per step: ok, SKIPPED, FAILED, with the figures), steps.tar.gz (each step's whole
# output, the info and any build log), and nothing else. About 9 minutes on an H200 (each step's limit is a backstop).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bundle=${RR_GPU_BUNDLE:-$repo/gpu-bundle}
programs=(cli/ringreduce test/collectives_check test/gpu_stream_check bench/gpu_kernels)

make_bundle() {
  local build=${1:-$repo/build}
  rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/deps/include"
  for p in "${programs[@]}"; do
    [ -x "$build/$p" ] || { echo "missing $build/$p: build with -Dcuda=enabled first" >&2; exit 1; }
    strip --strip-debug -o "$bundle/bin/$(basename "$p")" "$build/$p"
  done
  # Shared libraries that are neither glibc's nor CUDA's (the GPU machine has its own CUDA).
  for p in "${programs[@]}"; do ldd "$build/$p"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so|/libcu|/usr/local/cuda' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  # UCX loads its transport modules from the folder "ucx" beside libucs.so; carry the
  # shared-memory one (cma: one-copy reads between processes). The InfiniBand modules need
  # libibverbs, which the GPU machine lacks.
  local ucs
  ucs=$(ldd "$build/cli/ringreduce" | awk '$1 ~ /^libucs\.so/ {print $3}')
  if [ -n "$ucs" ] && [ -d "$(dirname "$ucs")/ucx" ]; then
    mkdir -p "$bundle/lib/ucx"
    cp -L "$(dirname "$ucs")"/ucx/libuct_cma.so.0 "$bundle/lib/ucx/"
  fi
  # Headers for a build on the GPU machine (header-only use of spdlog and fmt).
  for d in spdlog fmt CLI nlohmann openssl catch2 asio asio.hpp; do cp -r "/usr/include/$d" "$bundle/deps/include/"; done
  cp -r /usr/include/x86_64-linux-gnu/openssl/. "$bundle/deps/include/openssl/"
  (cd "$repo" && git rev-parse HEAD 2>/dev/null) >"$bundle/COMMIT"
  echo "gpu bundle: $(du -sh "$bundle" | cut -f1) in $bundle"
  ls -la "$bundle/bin" "$bundle/lib" | awk 'NF > 5 {print "  " $5, $9}'
}

# Compiles the four programs here from the repository into $1 (used when the carried
# binaries do not start on this machine).
build_here() {
  local dir=$1 deps=$bundle/deps/include
  [ -d "$deps" ] || { echo "no carried headers in $deps"; return 1; }
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  local cuda
  cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  mkdir -p "$dir/obj"
  local crypto  # OpenSSL's libcrypto (HMAC): the machine's, else the carried one
  crypto=$(ldconfig -p 2>/dev/null | awk '/libcrypto\.so\.3 .*x86-64/ {print $NF; exit}')
  [ -n "$crypto" ] || crypto=$bundle/lib/libcrypto.so.3
  echo "   libcrypto: $crypto; CUDA: $cuda"
  local common=(-O2 -std=c++20 -pthread -I"$repo" -I"$repo/include" -isystem "$deps" -isystem "$cuda/include"
                -DSPDLOG_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL -DFMT_HEADER_ONLY -fvisibility=hidden)
  local nvflags=(-std=c++20 -O3 -I"$repo" -I"$repo/include" -isystem "$deps"
                 -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90
                 -gencode=arch=compute_90,code=compute_90)
  local lib_sources=(engine/*.cc transport/*.cc transport/tcp/*.cc kernels/dtype.cc
                     kernels/reduce_dispatch.cc kernels/reduce_reference.cc kernels/device_fake.cc kernels/fake_gpu.cc
                     kernels/cuda/cuda_device.cc)
  local jobs=() src obj flags
  cd "$repo" || return 1
  for src in "${lib_sources[@]}" kernels/reduce_baseline.cc kernels/reduce_avx2.cc kernels/reduce_avx512.cc \
             cli/main.cc cli/bench.cc cli/launcher.cc cli/info.cc cli/cuda_probe.cc cli/device_buffers.cc \
             test/collectives_check.cc; do
    obj=$dir/obj/$(echo "$src" | tr / _).o
    flags=()
    case $src in
      kernels/reduce_reference.cc) flags=(-fno-tree-vectorize) ;;
      kernels/reduce_baseline.cc) flags=(-O3) ;;
      kernels/reduce_avx2.cc) flags=(-O3 -mavx2 -mfma -mf16c) ;;
      kernels/reduce_avx512.cc) flags=(-O3 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c -mprefer-vector-width=512) ;;
      engine/*) flags=(-DRR_BUILDING_LIBRARY -DASIO_STANDALONE -DASIO_SEPARATE_COMPILATION -DASIO_NO_DEPRECATED -DASIO_DISABLE_STD_ALIGNED_ALLOC) ;;
      cli/*) flags=(-DRR_BUILD_TYPE='"release (built on the GPU machine)"' -DRR_BUILD_CUDA='"enabled"') ;;
      test/collectives_check.cc) flags=(-DRR_TEST_CUDA) ;;
    esac
    g++ "${common[@]}" "${flags[@]}" -c "$src" -o "$obj" &
    jobs+=($!)
  done
  for src in kernels/cuda/reduce_kernels.cu test/gpu_stream_check.cu bench/gpu_kernels.cu; do
    nvcc "${nvflags[@]}" -c "$src" -o "$dir/obj/$(echo "$src" | tr / _).o" &
    jobs+=($!)
  done
  local failed=0 j
  for j in "${jobs[@]}"; do wait "$j" || failed=1; done
  [ $failed = 0 ] || { echo "   compiling failed"; return 1; }
  local libobjs=()
  for src in "${lib_sources[@]}" kernels/reduce_baseline.cc kernels/reduce_avx2.cc kernels/reduce_avx512.cc; do
    libobjs+=("$dir/obj/$(echo "$src" | tr / _).o")
  done
  libobjs+=("$dir/obj/kernels_cuda_reduce_kernels.cu.o")
  local link=("$crypto" "$cuda/lib64/libcudart_static.a" -ldl -lrt -pthread)
  mkdir -p "$dir/cli" "$dir/test" "$dir/bench"
  g++ -o "$dir/cli/ringreduce" "$dir"/obj/cli_*.o "${libobjs[@]}" "${link[@]}" &&
    g++ -o "$dir/test/collectives_check" "$dir/obj/test_collectives_check.cc.o" "${libobjs[@]}" "${link[@]}" &&
    g++ -o "$dir/test/gpu_stream_check" "$dir/obj/test_gpu_stream_check.cu.o" "${libobjs[@]}" "${link[@]}" &&
    g++ -o "$dir/bench/gpu_kernels" "$dir/obj/bench_gpu_kernels.cu.o" "${libobjs[@]}" \
      -L"$cuda/lib64" -lcublas -Wl,-rpath,"$cuda/lib64" "${link[@]}"
}

if [ "${1:-}" = --bundle ]; then
  make_bundle "${2:-}"
  exit 0
fi

out=${1:?usage: bash bench/gpu_check.sh OUT_DIR   (or --bundle [BUILD_DIR] to prepare)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
steps=$out/steps          # packed into steps.tar.gz at the end
mkdir -p "$steps"
exec > >(tee "$out/gpu_check.log") 2>&1
start=$(date +%s)
deadline=$(( start + ${RR_GPU_BUDGET_S:=100000} ))
export RR_TIMEOUT_MS=${RR_TIMEOUT_MS:-20000} RR_CONNECT_TIMEOUT_MS=20000
# The steps run over the TCP backend (RR_TRANSPORT=auto would take UCX's shared memory for
# these one-host jobs); the ucx steps below set UCX's.
export RR_TRANSPORT=tcp

finish() {
  tar -C "$out" -czf "$out/steps.tar.gz" steps && rm -rf "$steps"
  echo "== summary ($(( $(date +%s) - start )) s)"
  cat "$out/summary.txt"
}

echo "== machine"
sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null
ldd --version 2>&1 | head -1
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current --format=csv,noheader 2>&1 | head -4
nvidia-smi 2>&1 | sed -n 's/.*\(CUDA Version: [0-9.]*\).*/\1 (driver)/p' | head -1
(command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -2 | head -1
echo "cores: $(nproc), g++: $(g++ -dumpfullversion 2>/dev/null || echo none), bundle commit: $(cat "$bundle/COMMIT" 2>/dev/null || echo none), repository commit: $(cd "$repo" && git rev-parse HEAD 2>/dev/null || echo unknown)"

export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bin=$bundle/bin
declare -A path=([ringreduce]=$bin/ringreduce [collectives_check]=$bin/collectives_check
                 [gpu_stream_check]=$bin/gpu_stream_check [gpu_kernels]=$bin/gpu_kernels)
echo "== binaries"
starts() {  # every program's libraries resolve (ldd names a missing one or symbol version)
  local p
  for p in "${path[@]}"; do
    [ -x "$p" ] || { echo "$p: missing"; return 1; }
    ldd "$p" 2>&1 | grep -E 'not found' && return 1
  done
  timeout 60 "${path[ringreduce]}" info
}
: >"$out/summary.txt"
# RR_GPU_BUILD_HERE=1 skips the carried binaries (to test the build path).
if [ "${RR_GPU_BUILD_HERE:-0}" = 1 ]; then
  echo "RR_GPU_BUILD_HERE=1: not trying the carried binaries" >"$steps/info.txt"
fi
if [ "${RR_GPU_BUILD_HERE:-0}" != 1 ] && starts >"$steps/info.txt" 2>&1; then
  echo "carried binaries start here"
else
  echo "carried binaries do not start here:"
  sed 's/^/   /' "$steps/info.txt"
  echo "== building here from the repository"
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH#"$bundle/lib:"}
  b=$out/build
  if build_here "$b" >"$steps/build.txt" 2>&1; then
    echo "built in $(( $(date +%s) - start )) s"
    path=([ringreduce]=$b/cli/ringreduce [collectives_check]=$b/test/collectives_check
          [gpu_stream_check]=$b/test/gpu_stream_check [gpu_kernels]=$b/bench/gpu_kernels)
    timeout 60 "${path[ringreduce]}" info >"$steps/info.txt" 2>&1
  else
    echo "FAILED: building here; the end of the build log:"
    tail -30 "$steps/build.txt"
    echo "build: FAILED" >>"$out/summary.txt"
    rm -rf "$b"
    finish
    exit 1
  fi
fi
sed 's/^/   /' "$steps/info.txt"
grep -E '^(cuda|stream ordering|warning)' "$steps/info.txt" | sed 's/^/info: /' >>"$out/summary.txt"

# step NAME SECONDS COMMAND...: runs it with a time limit, output in steps/NAME.txt.
failures=0
step() {
  local name=$1 secs=$2
  shift 2
  local t0=$(date +%s)
  if [ -n "${RR_GPU_STEPS:-}" ] && ! [[ $name =~ ^(${RR_GPU_STEPS})$ ]]; then
    : >"$steps/$name.txt"  # not selected: nothing to report (the summaries read this file)
    return
  fi
  echo "== $name"
  local left=$(( deadline - t0 ))  # RR_GPU_BUDGET_S: the whole check ends in time to pack
  if [ "$left" -lt 10 ]; then
    echo "$name: SKIPPED (RR_GPU_BUDGET_S=${RR_GPU_BUDGET_S} spent)" | tee -a "$out/summary.txt"
    return
  fi
  [ "$secs" -gt "$left" ] && secs=$left
  timeout --kill-after=5 "$secs" "$@" >"$steps/$name.txt" 2>&1
  local rc=$?
  local verdict=ok
  if [ $rc = 77 ]; then verdict=SKIPPED; elif [ $rc = 124 ] || [ $rc = 137 ]; then verdict="FAILED (killed at the ${secs} s limit)"; failures=$((failures + 1)); elif [ $rc != 0 ]; then verdict="FAILED (exit $rc)"; failures=$((failures + 1)); fi
  tail -12 "$steps/$name.txt" | sed 's/^/   /'
  echo "$name: $verdict in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}

rr=${path[ringreduce]}
step kernels 60 "${path[gpu_kernels]}"
grep -E 'GB/s' "$steps/kernels.txt" | sed 's/^/   kernels: /' >>"$out/summary.txt"
for n in 1 2 4; do
  step "collectives-gpu-n$n" 90 "$rr" run -n $n -- "${path[collectives_check]}" --device
  grep -E 'checks passed|FAILED' "$steps/collectives-gpu-n$n.txt" | head -2 | sed 's/^/   /' >>"$out/summary.txt"
done
for n in 1 2 4; do
  step "stream-n$n" 60 "$rr" run -n $n -- "${path[gpu_stream_check]}"
  grep -E 'concurrency|FAILED|returned while' "$steps/stream-n$n.txt" | head -3 | sed 's/^/   /' >>"$out/summary.txt"
done
# The same with every kernel loaded at start. Without it the check's own countWrong kernel
# is first launched while the all-reduce holds the stream (a lazy load, a barrier across the
# device); the steps above pass only if the library queued all of its device work at the call.
for n in 2 4; do
  CUDA_MODULE_LOADING=EAGER step "stream-eager-n$n" 60 "$rr" run -n $n -- "${path[gpu_stream_check]}"
  grep -E 'concurrency|FAILED|returned while' "$steps/stream-eager-n$n.txt" | head -3 | sed 's/^/   /' >>"$out/summary.txt"
done
# ratio LABEL HOST DEVICE: busbw of GPU buffers over host buffers per size into the summary
# (target: at least 0.9 from 4 MiB up).
ratio() {
  [ -f "$2" ] && [ -f "$3" ] || return 0
  awk -v label="$1" 'FNR == 1 {file++} /^ +[0-9]/ {bw[file, $1] = $8; sizes[$1] = 1}
       END {for (s in sizes) if ((1, s) in bw && (2, s) in bw && bw[1, s] > 0)
              printf "   bench %s %d MiB: host %.3f GB/s, device %.3f GB/s, device/host %.3f\n",
                     label, s / 1048576, bw[1, s], bw[2, s], bw[2, s] / bw[1, s]}' \
    "$2" "$3" | sort -t' ' -k4 -n >>"$out/summary.txt"
}
step bench-host-n2 60 "$rr" bench -N 2 -b 4M -e 256M -f 4 -n 10 -w 2
step bench-device-n2 60 "$rr" bench -N 2 -b 4M -e 256M -f 4 -n 10 -w 2 --device
ratio n=2 "$steps/bench-host-n2.txt" "$steps/bench-device-n2.txt"
step bench-host-n4 60 "$rr" bench -N 4 -b 4M -e 256M -f 4 -n 10 -w 2
step bench-device-n4 60 "$rr" bench -N 4 -b 4M -e 256M -f 4 -n 10 -w 2 --device
ratio n=4 "$steps/bench-host-n4.txt" "$steps/bench-device-n4.txt"
# Device buckets at 4 MiB ran slower than host ones: the same sizes with other segment sizes
# (RR_SEGMENT_BYTES; 1 MiB is the default), host and device, to see whether the cost is per
# segment (the stream's wait, kernel and write for each) or per byte.
for seg in 262144 4194304; do
  RR_SEGMENT_BYTES=$seg step "bench-host-n2-seg$seg" 40 "$rr" bench -N 2 -b 4M -e 16M -f 4 -n 20 -w 3
  RR_SEGMENT_BYTES=$seg step "bench-device-n2-seg$seg" 40 "$rr" bench -N 2 -b 4M -e 16M -f 4 -n 20 -w 3 --device
  ratio "n=2 RR_SEGMENT_BYTES=$seg" "$steps/bench-host-n2-seg$seg.txt" "$steps/bench-device-n2-seg$seg.txt"
done
# Smaller buckets (the cost a device bucket pays per call) and where a 4 MiB one's time goes
# (RR_PHASES=1: each rank prints its phases at the end).
step bench-host-n2-small 40 "$rr" bench -N 2 -b 64K -e 4M -f 4 -n 50 -w 5
step bench-device-n2-small 40 "$rr" bench -N 2 -b 64K -e 4M -f 4 -n 50 -w 5 --device
ratio "n=2 small" "$steps/bench-host-n2-small.txt" "$steps/bench-device-n2-small.txt"
for where in host device; do
  RR_PHASES=1 step "phases-$where-n2" 40 "$rr" bench -N 2 -b 64K -e 4M -f 64 -n 100 -w 10 $([ $where = device ] && echo --device)
  grep -E '^ +(65536|4194304) \|' "$steps/phases-$where-n2.txt" | sed "s/^/   phases $where: /" >>"$out/summary.txt"
done
# The same with one-thread kernels polling and writing the flags in place of the stream
# memory operations (RR_GPU_FLAG_OPS=kernels): is a 64 KiB device bucket's time the
# operations' latency? Then the collectives and stream ordering that way.
RR_GPU_FLAG_OPS=kernels RR_PHASES=1 step phases-device-n2-flagkernels 40 "$rr" bench -N 2 -b 64K -e 4M -f 64 -n 100 -w 10 --device
grep -E '^ +(65536|4194304) \|' "$steps/phases-device-n2-flagkernels.txt" | sed "s/^/   phases device, flag kernels: /" >>"$out/summary.txt"
RR_GPU_FLAG_OPS=kernels step bench-device-n2-flagkernels 40 "$rr" bench -N 2 -b 64K -e 256M -f 4 -n 20 -w 3 --device
ratio "n=2 flag kernels" "$steps/bench-host-n2-small.txt" "$steps/bench-device-n2-flagkernels.txt"
RR_GPU_FLAG_OPS=kernels step bench-device-n4-flagkernels 40 "$rr" bench -N 4 -b 64K -e 256M -f 4 -n 20 -w 3 --device
RR_GPU_FLAG_OPS=kernels step collectives-gpu-n2-flagkernels 90 "$rr" run -n 2 -- "${path[collectives_check]}" --device
grep -E 'checks passed|FAILED' "$steps/collectives-gpu-n2-flagkernels.txt" | head -2 | sed 's/^/   /' >>"$out/summary.txt"
RR_GPU_FLAG_OPS=kernels step stream-n2-flagkernels 60 "$rr" run -n 2 -- "${path[gpu_stream_check]}"
grep -E 'concurrency|FAILED|returned while' "$steps/stream-n2-flagkernels.txt" | head -3 | sed 's/^/   /' >>"$out/summary.txt"
# Ranks that share one GPU are separate processes, each with its own CUDA context, and a GPU
# time-slices between contexts: a rank's kernel may wait for another rank's slice. Under MPS
# (one server context for all) they do not. The device bench again under an MPS daemon of
# this check's own (its pipe and log folders under OUT_DIR; stopped at the end; no device
# setting changes), where the driver ships nvidia-cuda-mps-control.
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$out/mps/pipe CUDA_MPS_LOG_DIRECTORY=$out/mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    RR_PHASES=1 step phases-device-n2-mps 40 "$rr" bench -N 2 -b 64K -e 4M -f 64 -n 100 -w 10 --device
    grep -E '^ +(65536|4194304) \|' "$steps/phases-device-n2-mps.txt" | sed "s/^/   phases device, MPS: /" >>"$out/summary.txt"
    step bench-device-n2-small-mps 40 "$rr" bench -N 2 -b 64K -e 4M -f 4 -n 50 -w 5 --device
    ratio "n=2 small, device under MPS" "$steps/bench-host-n2-small.txt" "$steps/bench-device-n2-small-mps.txt"
    step bench-device-n4-mps 60 "$rr" bench -N 4 -b 4M -e 256M -f 4 -n 10 -w 2 --device
    ratio "n=4, device under MPS" "$steps/bench-host-n4.txt" "$steps/bench-device-n4-mps.txt"
    RR_GPU_PROGRAM=1 RR_PHASES=1 step program-phases-device-n2-mps 40 "$rr" bench -N 2 -b 64K -e 4M -f 64 -n 100 -w 10 --device
    grep -E '^ +(65536|4194304) \|' "$steps/program-phases-device-n2-mps.txt" | sed "s/^/   phases device, one kernel per collective, MPS: /" >>"$out/summary.txt"
    RR_GPU_PROGRAM=1 step program-bench-device-n2-small-mps 40 "$rr" bench -N 2 -b 64K -e 4M -f 4 -n 50 -w 5 --device
    ratio "n=2 small, one kernel per collective under MPS" "$steps/bench-host-n2-small.txt" "$steps/program-bench-device-n2-small-mps.txt"
    RR_GPU_PROGRAM=1 step program-bench-device-n4-mps 60 "$rr" bench -N 4 -b 4M -e 256M -f 4 -n 10 -w 2 --device
    ratio "n=4, one kernel per collective under MPS" "$steps/bench-host-n4.txt" "$steps/program-bench-device-n4-mps.txt"
    step stream-n2-mps 60 "$rr" run -n 2 -- "${path[gpu_stream_check]}"
    grep -E 'concurrency|FAILED|returned while' "$steps/stream-n2-mps.txt" | head -3 | sed 's/^/   /' >>"$out/summary.txt"
    echo quit | nvidia-cuda-mps-control
    sleep 1
  else
    echo "mps: SKIPPED (nvidia-cuda-mps-control -d failed)" | tee -a "$out/summary.txt"
  fi
  cp -r "$CUDA_MPS_LOG_DIRECTORY" "$steps/mps-log" 2>/dev/null
  rm -rf "$out/mps"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  echo "mps: SKIPPED (no nvidia-cuda-mps-control)" | tee -a "$out/summary.txt"
fi
# One kernel per collective (RR_GPU_PROGRAM=1) in place of a stream entry per wait,
# reduction, copy and signal: the collectives, stream ordering, the bench and its phases,
# UCX shared memory, and memcheck over the collectives.
export RR_GPU_PROGRAM=1
for n in 2 4; do
  step "program-collectives-n$n" 90 "$rr" run -n $n -- "${path[collectives_check]}" --device
  grep -E 'checks passed|FAILED' "$steps/program-collectives-n$n.txt" | head -2 | sed 's/^/   /' >>"$out/summary.txt"
  step "program-stream-n$n" 60 "$rr" run -n $n -- "${path[gpu_stream_check]}"
  grep -E 'concurrency|FAILED|returned while' "$steps/program-stream-n$n.txt" | head -3 | sed 's/^/   /' >>"$out/summary.txt"
done
step program-bench-device-n2-small 40 "$rr" bench -N 2 -b 64K -e 4M -f 4 -n 50 -w 5 --device
ratio "n=2 small, one kernel per collective" "$steps/bench-host-n2-small.txt" "$steps/program-bench-device-n2-small.txt"
step program-bench-device-n2 60 "$rr" bench -N 2 -b 4M -e 256M -f 4 -n 10 -w 2 --device
ratio "n=2, one kernel per collective" "$steps/bench-host-n2.txt" "$steps/program-bench-device-n2.txt"
step program-bench-device-n4 60 "$rr" bench -N 4 -b 4M -e 256M -f 4 -n 10 -w 2 --device
ratio "n=4, one kernel per collective" "$steps/bench-host-n4.txt" "$steps/program-bench-device-n4.txt"
RR_PHASES=1 step program-phases-device-n2 40 "$rr" bench -N 2 -b 64K -e 4M -f 64 -n 100 -w 10 --device
grep -E '^ +(65536|4194304) \|' "$steps/program-phases-device-n2.txt" | sed "s/^/   phases device, one kernel per collective: /" >>"$out/summary.txt"
RR_TRANSPORT=ucx UCX_TLS=self,sm step program-ucx-collectives-n2 90 "$rr" run -n 2 -- "${path[collectives_check]}" --device
grep -E 'checks passed|FAILED' "$steps/program-ucx-collectives-n2.txt" | head -2 | sed 's/^/   /' >>"$out/summary.txt"
# compute-sanitizer, for the program's memcheck here and the memcheck steps at the end.
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$cs" ]; then
  step program-memcheck-collectives-n2 150 "$rr" run -n 2 -- "$cs" --tool memcheck --error-exitcode 9 \
    "${path[collectives_check]}" --device
  grep -E 'ERROR SUMMARY|checks passed|FAILED' "$steps/program-memcheck-collectives-n2.txt" | head -4 | sed 's/^/   /' >>"$out/summary.txt"
fi
unset RR_GPU_PROGRAM
RR_ALGO=ring step collectives-gpu-n2-ring 90 "$rr" run -n 2 -- "${path[collectives_check]}" --device
grep -E 'checks passed|FAILED' "$steps/collectives-gpu-n2-ring.txt" | head -2 | sed 's/^/   /' >>"$out/summary.txt"
if grep -q 'transports: tcp, ucx' "$steps/info.txt"; then
  export RR_TRANSPORT=ucx UCX_TLS=self,sm
  for n in 2 4; do
    step "ucx-collectives-gpu-n$n" 90 "$rr" run -n $n -- "${path[collectives_check]}" --device
    grep -E 'checks passed|FAILED' "$steps/ucx-collectives-gpu-n$n.txt" | head -2 | sed 's/^/   /' >>"$out/summary.txt"
  done
  step ucx-stream-n2 60 "$rr" run -n 2 -- "${path[gpu_stream_check]}"
  grep -E 'concurrency|FAILED|returned while' "$steps/ucx-stream-n2.txt" | head -3 | sed 's/^/   /' >>"$out/summary.txt"
  step ucx-bench-host-n2 60 "$rr" bench -N 2 -b 4M -e 256M -f 4 -n 10 -w 2
  step ucx-bench-device-n2 60 "$rr" bench -N 2 -b 4M -e 256M -f 4 -n 10 -w 2 --device
  ratio "n=2 ucx sm" "$steps/ucx-bench-host-n2.txt" "$steps/ucx-bench-device-n2.txt"
  export RR_TRANSPORT=tcp
  unset UCX_TLS
else
  echo "ucx: SKIPPED (these binaries have no UCX transport)" | tee -a "$out/summary.txt"
fi
# Last: compute-sanitizer's memcheck over the library's kernels (the kernel benchmark runs
# each of them), then over the collectives at n = 2. When the progress thread launched the
# kernels as segments landed, the collectives stalled under compute-sanitizer at their first
# all-reduce with device work (the caller's stream, held until the collective ended, held
# back the library's kernels, with CUDA_MODULE_LOADING=EAGER as well); queued at the call,
# they should not.
if [ -x "$cs" ]; then
  step memcheck-kernels 120 "$cs" --tool memcheck --error-exitcode 9 "${path[gpu_kernels]}"
  grep -E 'ERROR SUMMARY' "$steps/memcheck-kernels.txt" | head -1 | sed 's/^/   /' >>"$out/summary.txt"
  step memcheck-collectives-n2 150 "$rr" run -n 2 -- "$cs" --tool memcheck --error-exitcode 9 \
    "${path[collectives_check]}" --device
  grep -E 'ERROR SUMMARY|checks passed|FAILED' "$steps/memcheck-collectives-n2.txt" | head -4 | sed 's/^/   /' >>"$out/summary.txt"
else
  echo "memcheck: SKIPPED (no compute-sanitizer)" | tee -a "$out/summary.txt"
fi
rm -rf "$out/build"
finish
exit $(( failures > 0 ))
