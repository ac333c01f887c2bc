// CUDA devices as the runtime sees them, for `ringreduce info` (built when CUDA is found),
// and how a caller's stream waits for a collective on the first of them.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "kernels/device.h"

namespace rr::cli {

std::string cudaReport() {
  int count = 0;  // left untouched when the call fails
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess)
    return fmt::format("no devices: {} ({})", cudaGetErrorString(rc), cudaGetErrorName(rc));
  if (count == 0) return "no devices: the driver reports none";
  std::string out = fmt::format("{} device(s)", count);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess)
      out += fmt::format("; {}: {} (sm_{}{}, {:.1f} GiB)", i, prop.name, prop.major, prop.minor,
                         static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  }
  try {
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) current = 0;
    const char* flagOps = std::getenv("RR_GPU_FLAG_OPS");  // as a communicator would open it
    const char* programs = std::getenv("RR_GPU_PROGRAM");
    const std::unique_ptr<rr::Device> device =
        rr::openCudaDevice(current, flagOps != nullptr && std::string_view(flagOps) == "kernels",
                           programs != nullptr && std::string_view(programs) == "1");
    out += fmt::format("\nstream ordering on GPU {}: the caller's stream waits on the GPU by {}",
                       current, device->streamWait());
  } catch (const rr::DeviceError& e) {
    out += fmt::format("\nstream ordering: cannot open the GPU: {}", e.what());
  }
  return out;
}

}  // namespace rr::cli
