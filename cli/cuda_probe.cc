// CUDA devices as the runtime sees them, for `ringreduce info` (built when CUDA is found).
#include <cuda_runtime_api.h>

#include <string>

#include <fmt/format.h>

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
  return out;
}

}  // namespace rr::cli
