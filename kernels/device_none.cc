// A build without CUDA: every buffer is host memory, and asking for a stream or a device is
// RR_ERR_UNSUPPORTED (the engine checks cudaBuilt() before calling the rest).
#include "kernels/device.h"

namespace rr {
namespace {
[[noreturn]] void noCuda() {
  throw std::logic_error("this build of ringreduce has no CUDA support (configure with -Dcuda=enabled)");
}
}  // namespace

bool cudaBuilt() { return false; }
int pointerDevice(const void*) { return -1; }
int streamDevice(void*) { noCuda(); }
std::unique_ptr<Device> openCudaDevice(int, bool, bool) { noCuda(); }

}  // namespace rr
