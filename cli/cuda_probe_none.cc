// `ringreduce info` in a build without CUDA.
#include <string>

namespace rr::cli {

std::string cudaReport() { return "not built with CUDA (nvcc was not found at configure time)"; }

}  // namespace rr::cli
