// GPU memory for `ringreduce bench --device`, on the CUDA runtime.
#include "cli/device_buffers.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace rr::cli {
namespace {

void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(rc) + " (" +
                             cudaGetErrorName(rc) + ")");
}

}  // namespace

int pickDevice() {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw std::runtime_error("cudaGetDeviceCount: no CUDA devices");
  int local = 0;
  for (const char* v : {"RR_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) {
      local = std::atoi(s);
      break;
    }
  return (local < 0 ? 0 : local) % count;
}

void* deviceAlloc(size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes < 64 ? 64 : bytes), "cudaMalloc");
  return p;
}

void deviceFree(void* p) { cudaFree(p); }

void copyToDevice(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
}

void copyToHost(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
}

const char* deviceName(int device) {
  static thread_local cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown GPU";
  return prop.name;
}

}  // namespace rr::cli
