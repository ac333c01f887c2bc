// `ringreduce bench --device` in a build without CUDA: an error that says so.
#include <stdexcept>

#include "cli/device_buffers.h"

namespace rr::cli {
namespace {
[[noreturn]] void noCuda() {
  throw std::runtime_error("this build of ringreduce has no CUDA support (configure with -Dcuda=enabled)");
}
}  // namespace

int pickDevice() { noCuda(); }
void* deviceAlloc(size_t, int) { noCuda(); }
void deviceFree(void*) {}
void copyToDevice(void*, const void*, size_t) { noCuda(); }
void copyToHost(void*, const void*, size_t) { noCuda(); }
const char* deviceName(int) { return "none"; }

}  // namespace rr::cli
