// Communicator's device half (communicator.h): the GPU opened on the first submission that
// needs it, a device bucket's work queued at its submission behind the caller's stream, and
// the stream ordering of host buckets (engine/run/stream_order.h, engine/run/device_pass.h;
// docs/gpu.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <string>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "engine/communicator.h"
#include "engine/run/device_pass.h"
#include "engine/run/op_header.h"
#include "engine/run/progress_engine.h"
#include "engine/run/stream_order.h"
#include "kernels/device.h"

namespace rr {
namespace {

std::string where(int device) {
  return device < 0 ? std::string("host memory") : fmt::format("memory of GPU {}", device);
}

}  // namespace

int Communicator::bufferDevice(const void* send, const void* recv, size_t count, const char* name) const {
  // Both host memory, or both memory of this communicator's GPU.
  if (config_.fakeDevice) return 0;
  if (count == 0) return -1;
  const int sendDevice = pointerDevice(send);
  const int recvDevice = pointerDevice(recv);
  if (sendDevice != recvDevice)
    fail(RR_ERR_INVALID_ARGUMENT,
         "{} on rank {}: the send buffer is {} and the receive buffer is {}; both must be "
         "host memory or both memory of the same GPU",
         name, config_.rank, where(sendDevice), where(recvDevice));
  return sendDevice;
}

void Communicator::openDeviceFor(void* stream, int device, const char* name) {
  if (stream != nullptr && !cudaBuilt() && !config_.fakeDevice)
    fail(RR_ERR_UNSUPPORTED,
         "{} on rank {}: a CUDA stream was given, but this build of ringreduce has no CUDA "
         "support (stream must be NULL)",
         name, config_.rank);
  int gpu = device;
  try {
    if (!config_.fakeDevice && stream != nullptr) {
      const int streamGpu = streamDevice(stream);
      if (device >= 0 && streamGpu != device)
        fail(RR_ERR_INVALID_ARGUMENT,
             "{} on rank {}: the buffers are memory of GPU {}, but the stream belongs to GPU {}",
             name, config_.rank, device, streamGpu);
      gpu = streamGpu;
    }
  } catch (const DeviceError& e) {
    fail(RR_ERR_CUDA, "{} on rank {}: {}", name, config_.rank, e.what());
  }
  openDevice(gpu, name);
}

void Communicator::orderOnStream(Request& request, void* stream, const std::function<void()>& push,
                                 const char* name) {
  request.programBase = request.programEnd = programEnd_;
  const OpDesc& d = request.desc;
  if (request.device >= 0) {
    if (config_.size == 1)
      request.programEnd += d.count > 0 && request.send != request.recv && d.kind != Collective::kBroadcast ? 1 : 0;
    else {
      request.deviceSchedule = scheduleFor(d.kind, d.dtype, d.count, d.root, true);
      request.programEnd += static_cast<uint32_t>(Schedule(request.deviceSchedule).numUnits());
    }
    programEnd_ = request.programEnd;  // taken even if queueing fails: the values stay in step
  }
  bool pushed = false;
  try {
    streamOrder_->order(
        request, stream, request.device >= 0 ? std::function<void()>([&] { queueDeviceWorkFor(request); }) : nullptr,
        [&] {
          push();
          pushed = true;
        });
  } catch (const DeviceError& e) {
    const std::string message = fmt::format("{} on rank {}: {}", name, config_.rank, e.what());
    // Queued with part of its device work (or without its stream held): the device's
    // queue is no longer in step with the passes, so everything in flight fails.
    if (pushed) abort(message + " (the communicator is aborted: its GPU work is incomplete)");
    throw Error(RR_ERR_CUDA, message);
  }
}

void Communicator::openDevice(int ordinal, const char* name) {
  std::lock_guard<std::mutex> lock(deviceMutex_);
  if (device_) {
    if (device_->ordinal() != ordinal)
      fail(RR_ERR_INVALID_ARGUMENT,
           "{} on rank {}: the buffers are memory of GPU {}, but this communicator works on "
           "GPU {} (create one communicator per GPU)",
           name, config_.rank, ordinal, device_->ordinal());
    return;
  }
  try {
    std::unique_ptr<Device> device =
        config_.fakeDevice
            ? openFakeDevice(config_.testHoldByHostFunction,
                             config_.testLazyKernels ? std::max(1, config_.timeoutMs / 2) : 0,
                             static_cast<size_t>(config_.testGpuQueueDepth), config_.gpuProgram)
            : openCudaDevice(ordinal, config_.gpuFlagKernels, config_.gpuProgram);
    if (engine_) engine_->attachDevice(device.get());
    streamOrder_ = std::make_unique<StreamOrder>(*device);
    device_ = std::move(device);
    log_->info("device buckets and streams on {}; the caller's stream waits on the GPU by {}",
               device_->describe(), device_->streamWait());
  } catch (const DeviceError& e) {
    fail(RR_ERR_CUDA, "rank {}: opening GPU {}: {}", config_.rank, ordinal, e.what());
  }
}

Device* Communicator::prepare(Request& r) {
  if (r.order == nullptr) return nullptr;
  // A device bucket's work was queued at submission, behind the caller's stream: the pass
  // makes no CUDA call. A host bucket waits here for the caller's stream.
  if (r.device >= 0) return device_.get();
  streamOrder_->start(r, config_.rank, config_.timeoutMs, aborted_);
  return nullptr;
}

void Communicator::queueDeviceWorkFor(const Request& r) {
  Device& device = *device_;
  if (config_.size == 1) {  // every reduction is a copy (runLocal)
    if (r.programEnd == r.programBase) return;
    device.copy(r.recv, r.send, r.bytes, r.programEnd);
    device.signalFlag(Device::kDone, r.programEnd);
    return;
  }
  const Collective kind = r.desc.kind;
  const Schedule schedule(r.deviceSchedule);
  DeviceWork w{schedule, r.desc.dtype, r.desc.op, config_.size, r.send, r.recv,
               engine_->devStaging(), engine_->segmentBytes(), r.programBase};
  // An all-gather's own block goes into place first, unless the call is in place.
  uint8_t* mine = static_cast<uint8_t*>(r.recv) + static_cast<size_t>(config_.rank) * r.bytes;
  if (kind == Collective::kAllGather && r.desc.count > 0 && static_cast<const uint8_t*>(r.send) != mine) {
    w.preludeFrom = r.send;
    w.preludeTo = mine;
    w.preludeBytes = r.bytes;
  }
  queueDeviceWork(w, device);
}

void Communicator::waitDevice(Device& device, const Request& r) {
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(config_.timeoutMs);
  while (static_cast<int32_t>(device.flag(Device::kDone) - r.programEnd) < 0) {
    if (aborted_) fail(RR_ERR_ABORTED, "rank {}: rr_comm_abort was called", config_.rank);
    if (Clock::now() >= until)
      fail(RR_ERR_TIMEOUT,
           "{} on rank {}: device work on {} has not finished within {} ms: a copy between the "
           "buffers (it runs on the library's stream after the work queued on the caller's "
           "stream before the call)",
           describeOp(r.desc), config_.rank, device.describe(), config_.timeoutMs);
    std::this_thread::yield();
  }
}

}  // namespace rr
