// Kernel benchmark on a real GPU: the rate of the reduce-and-copy-out kernel on 256 MiB of
// fp32, fp16 and bf16 (all four operands in device memory), next to cudaMemcpy device to
// device (the bound) and cublasSaxpy (the peer) on the same data. Rates count the bytes each
// one reads and writes: reduce-and-copy-out 4x the buffer (reads mine and the received
// segment, writes the bucket and the outgoing slot), memcpy 2x, saxpy 3x. Prints a table and
// the ratio to the memcpy rate. Exits 77 saying why where there is no GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cuda/launch.h"

namespace {

void cudaCheck(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "FAILED: %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

template <class F>
double timeMs(F body, int iters) {
  cudaEvent_t a, b;
  cudaCheck(cudaEventCreate(&a), "cudaEventCreate");
  cudaCheck(cudaEventCreate(&b), "cudaEventCreate");
  body();  // warm-up
  cudaCheck(cudaEventRecord(a), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) body();
  cudaCheck(cudaEventRecord(b), "cudaEventRecord");
  cudaCheck(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  cudaCheck(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver reports none");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaCheck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int sms = 0;
  cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  const size_t bytes = size_t{256} << 20;
  const int iters = 20;
  void *mine, *in, *dst, *out;
  for (void** p : {&mine, &in, &dst, &out}) {
    cudaCheck(cudaMalloc(p, bytes), "cudaMalloc");
    cudaCheck(cudaMemset(*p, 0, bytes), "cudaMemset");
  }
  std::printf("# GPU kernel rates, %s (sm_%d%d, %d SMs), 256 MiB buffers, %d iterations, GB/s = "
              "bytes read + written / time\n", prop.name, prop.major, prop.minor, sms, iters);
  std::printf("%-34s %10s %10s %12s\n", "operation", "time (ms)", "GB/s", "vs memcpy");

  const double copyMs = timeMs([&] {
    cudaCheck(cudaMemcpyAsync(dst, mine, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  }, iters);
  const double copyRate = 2.0 * bytes / (copyMs * 1e6);
  std::printf("%-34s %10.3f %10.1f %12s\n", "cudaMemcpy device to device", copyMs, copyRate, "1.00x");

  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "FAILED: cublasCreate\n");
    return 1;
  }
  const float alpha = 1.0f;
  const double saxpyMs = timeMs([&] {
    if (cublasSaxpy(handle, static_cast<int>(bytes / 4), &alpha, static_cast<const float*>(in), 1,
                    static_cast<float*>(dst), 1) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "FAILED: cublasSaxpy\n");
      std::exit(1);
    }
  }, iters);
  const double saxpyRate = 3.0 * bytes / (saxpyMs * 1e6);
  std::printf("%-34s %10.3f %10.1f %11.2fx\n", "cublasSaxpy fp32", saxpyMs, saxpyRate, saxpyRate / copyRate);
  cublasDestroy(handle);

  struct Type {
    rr_dtype_t dtype;
    const char* name;
    size_t size;
  };
  for (const Type t : {Type{RR_FLOAT32, "fp32", 4}, Type{RR_FLOAT16, "fp16", 2}, Type{RR_BFLOAT16, "bf16", 2}}) {
    for (const bool copyOut : {true, false}) {
      const double ms = timeMs([&] {
        cudaCheck(static_cast<cudaError_t>(rr::cuda::launchReduceCopyOut(
                      dst, mine, in, copyOut ? out : nullptr, bytes / t.size, t.dtype, RR_SUM, rr::AvgStep{}, rr::cuda::Cancel{},
                      sms * 8, nullptr)), "reduce-and-copy-out launch");
      }, iters);
      const double rate = (copyOut ? 4.0 : 3.0) * bytes / (ms * 1e6);
      const std::string name = std::string(copyOut ? "reduce-and-copy-out sum " : "reduce (no copy-out) sum ") + t.name;
      std::printf("%-34s %10.3f %10.1f %11.2fx\n", name.c_str(), ms, rate, rate / copyRate);
    }
  }
  const double ms = timeMs([&] {
    cudaCheck(static_cast<cudaError_t>(rr::cuda::launchCopy(dst, mine, bytes, rr::cuda::Cancel{}, sms * 8, nullptr)),
              "copy launch");
  }, iters);
  const double rate = 2.0 * bytes / (ms * 1e6);
  std::printf("%-34s %10.3f %10.1f %11.2fx\n", "copy kernel (all-gather copy-in)", ms, rate, rate / copyRate);
  for (void* p : {mine, in, dst, out}) cudaFree(p);
  return 0;
}
