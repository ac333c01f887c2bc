// GPU memory for `ringreduce bench --device` (cudaMalloc and copies), or, in a build without
// CUDA, an error saying so. Failures throw std::runtime_error with CUDA's message.
#pragma once

#include <cstddef>

namespace rr::cli {

// The GPU this rank uses: RR_LOCAL_RANK (or the launcher's local rank) modulo the count.
int pickDevice();
void* deviceAlloc(size_t bytes, int device);
void deviceFree(void* p);
void copyToDevice(void* dst, const void* src, size_t bytes);
void copyToHost(void* dst, const void* src, size_t bytes);
const char* deviceName(int device);

}  // namespace rr::cli
