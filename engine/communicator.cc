// Communicator; see communicator.h.
#include "engine/communicator.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "engine/bootstrap.h"
#include "engine/device_pass.h"
#include "engine/fusion.h"
#include "engine/op_header.h"
#include "engine/phase_stats.h"
#include "engine/progress_engine.h"
#include "engine/stall_monitor.h"
#include "engine/stream_order.h"
#include "engine/timeline.h"
#include "engine/waker.h"
#include "kernels/device.h"
#include "kernels/dtype.h"
#include "base/error.h"
#include "transport/event_set.h"
#include "transport/tcp/tcp_transport.h"
#ifdef RR_HAVE_UCX
#include "transport/auto_transport.h"
#include "transport/ucx/ucx_transport.h"
#endif

namespace rr {
namespace {

std::shared_ptr<spdlog::logger> makeLogger(const Config& c) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("ringreduce", std::move(sink));
  log->set_pattern(fmt::format("[%H:%M:%S.%e] [ringreduce rank {}] [%l] %v", c.rank));
  auto level = spdlog::level::from_str(c.logLevel);
  if (level == spdlog::level::off && c.logLevel != "off")
    fail(RR_ERR_INVALID_ARGUMENT,
         "RR_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, off", c.logLevel);
  log->set_level(level);
  log->flush_on(spdlog::level::warn);
  return log;
}

size_t checkedBytes(size_t count, size_t factor, size_t elemSize, const char* what) {
  size_t elems = 0, bytes = 0;
  if (__builtin_mul_overflow(count, factor, &elems) ||
      __builtin_mul_overflow(elems, elemSize, &bytes) || bytes > (size_t{1} << 62))
    fail(RR_ERR_INVALID_ARGUMENT, "{}: count {} x {} elements of {} bytes overflows", what, count,
         factor, elemSize);
  return bytes;
}

std::string where(int device) {
  return device < 0 ? std::string("host memory") : fmt::format("memory of GPU {}", device);
}

}  // namespace

void checkDtypeOp(int dtype, int op, bool needOp) {
  if (!dtypeValid(dtype))
    fail(RR_ERR_INVALID_ARGUMENT, "unknown dtype {} (valid: 0..{})", dtype, kNumDtypes - 1);
  if (needOp && !opValid(op))
    fail(RR_ERR_INVALID_ARGUMENT, "unknown reduction op {} (valid: 0..{})", op, kNumOps - 1);
}

std::unique_ptr<Communicator> Communicator::create(const rr_config_t* overrides) {
  Config config = Config::load(overrides);
  auto log = makeLogger(config);
  std::unique_ptr<Communicator> comm(new Communicator(std::move(config), std::move(log)));
  comm->connect();
  comm->thread_ = std::thread([c = comm.get()] { c->progressLoop(); });
  return comm;
}

Communicator::Communicator(Config config, std::shared_ptr<spdlog::logger> log)
    : config_(std::move(config)), log_(std::move(log)) {}

Communicator::~Communicator() {
  // Collectives not yet finished are cancelled as rr_comm_abort cancels them (their peers
  // may never join them; a destroy must not wait RR_TIMEOUT_MS for them), then the thread
  // completes them all with that error and stops.
  const uint64_t submitted = queue_.lastSubmitted(), finished = finished_.load();
  if (submitted > finished)
    abort(fmt::format("rank {}: rr_comm_destroy was called with {} collective{} not finished "
                      "(op #{}{}); cancelled",
                      config_.rank, submitted - finished, submitted - finished == 1 ? "" : "s",
                      finished + 1, submitted - finished > 1 ? fmt::format("..#{}", submitted) : ""));
  queue_.close();
  if (thread_.joinable()) thread_.join();
  // A caller still in its blocking collective on another thread (runBlocking) has been
  // aborted above: wait until it has left the engine.
  std::lock_guard<std::mutex> engine(engineMutex_);
  for (Link* link : links()) link->startFarewell();
  const auto farewellUntil = std::chrono::steady_clock::now() + Link::kFarewellBound;
  for (Link* link : links()) link->finishFarewell(farewellUntil);
  for (Link* link : links()) link->shutdown();
  // The links go before the engine: a transport that moves bytes on its own (UCX) may hold
  // requests on the engine's staging until they are closed.
  left_.reset();
  right_.reset();
  partners_.clear();
  engine_.reset();
  streamOrder_.reset();
  device_.reset();
  waker_.reset();
  timeline_.reset();
  if (phases_) {
    const std::string summary = phases_->summary(config_.rank, config_.size);
    if (!summary.empty()) std::fputs(summary.c_str(), stderr);
  }
  transport_.reset();
  events_.reset();
}

void Communicator::connect() {
  log_->info("config: {}", config_.describe());
  if (config_.secret.empty() && config_.size > 1)
    log_->warn("RR_SECRET is not set: connections are authenticated with an empty key");
  barrierBuf_ = std::make_unique<uint8_t[]>(static_cast<size_t>(config_.size));
  timeline_ = Timeline::open(config_.timeline, config_.jobId, config_.rank);
  if (config_.phases) phases_ = std::make_unique<PhaseStats>();
  if (config_.size == 1) return;
  events_ = std::make_unique<EventSet>();
#ifdef RR_HAVE_UCX
  if (config_.transport == "ucx")
    transport_ = std::make_unique<UcxTransport>(transportJob(config_), *log_);
  else if (config_.transport == "auto")
    transport_ = std::make_unique<AutoTransport>(transportJob(config_), config_.socketsPerLink, *log_);
#endif
  if (!transport_)
    transport_ = std::make_unique<TcpTransport>(transportJob(config_), config_.socketsPerLink, *log_);
  Ring ring = connectRing(config_, *transport_, *events_, *log_);
  left_ = std::move(ring.links.left);
  right_ = std::move(ring.links.right);
  partners_ = std::move(ring.links.partners);
  bootstrap_ = std::move(ring.bootstrap);
  largeFrames_ = ring.largeFrames;
  fragmentFrames_ = ring.fragmentFrames;
  span_ = ring.oneHost ? Config::Span::kOneHost : Config::Span::kHosts;
  if (config_.size > 1)
    log_->info("the job's ranks {}: auto takes recursive doubling up to {} KiB",
               ring.oneHost ? "share one host" : "are on more than one host",
               Config::rdMaxBytes(config_.size, span_) >> 10);
  if (largeFrames_)
    log_->info("every link of the job reads its peers' frames: segments of {} KiB and more",
               kLargeFrameSegmentBytes >> 10);
  if (fragmentFrames_ && config_.segmentBytes > Link::kFragmentFrameBytes)
    log_->info("every link of the job copies frames through 256 KiB fragments: "
               "ring passes cut segments of at most {} KiB (RR_SEGMENT_BYTES {} KiB)",
               Link::kFragmentFrameBytes >> 10, config_.segmentBytes >> 10);
  waker_ = std::make_unique<Waker>(*events_);
  std::vector<PartnerLink> partners;
  for (const auto& p : partners_) partners.push_back(PartnerLink{p->peerRank(), p.get(), false});
  engine_ = std::make_unique<ProgressEngine>(config_.rank, config_.size, left_.get(),
                                             right_.get(), std::move(partners), *events_, config_.segmentBytes,
                                             config_.timeoutMs, std::chrono::microseconds(config_.spinUs),
                                             [this] { onIdle(); }, &aborted_);
  engine_->setTestPause(config_.testPauseAfterSendsMs);
  monitor_ = std::make_unique<StallMonitor>(config_.rank, config_.size, &bootstrap_,
                                            config_.stallWarnS, *log_);
  // At a timeout, rank 0 names who holds the job up; the wait for its answer is bounded.
  const auto askFor = std::chrono::milliseconds(std::clamp(config_.timeoutMs / 2, 100, 1000));
  engine_->setExplain([this, askFor](const StallState&, const std::function<void()>& meanwhile) {
    return monitor_->explain(queue_.lastSubmitted(), stallState(), askFor, meanwhile);
  });
  fusion_ = std::make_unique<FusionBuffer>(config_.fusionBytes);
}

std::optional<std::pair<rr_result_t, std::string>> Communicator::stickyError() {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

std::shared_ptr<Request> Communicator::submitBarrier(bool quiet) {
  // Its own kind in the op header; it runs as an all-reduce with one element per block, so
  // every rank's result depends on every rank. Concurrent barriers share the buffer
  // harmlessly: every result is zero.
  return submit(Collective::kBarrier, barrierBuf_.get(), barrierBuf_.get(),
                static_cast<size_t>(config_.size), RR_UINT8, RR_MAX, 0, nullptr, quiet);
}

std::shared_ptr<Request> Communicator::submit(Collective kind, const void* send, void* recv,
                                              size_t count, rr_dtype_t dtype, rr_op_t op,
                                              int root, void* stream, bool quiet) {
  const char* name = collectiveName(kind);
  if (auto e = stickyError()) throw Error(e->first, e->second);
  const bool reduces = kind == Collective::kAllReduce || kind == Collective::kReduceScatter ||
                       kind == Collective::kBarrier;
  checkDtypeOp(dtype, op, reduces);
  const size_t es = dtypeSize(dtype);
  const size_t n = static_cast<size_t>(config_.size);
  const size_t sendBytes = checkedBytes(count, kind == Collective::kReduceScatter ? n : 1, es, name);
  const size_t recvBytes = checkedBytes(count, kind == Collective::kAllGather ? n : 1, es, name);
  if (count > 0 && (send == nullptr || recv == nullptr))
    fail(RR_ERR_INVALID_ARGUMENT, "{} on rank {}: {} buffer is NULL with count {}", name,
         config_.rank, send == nullptr ? (kind == Collective::kBroadcast ? "the" : "the send")
                                       : "the receive",
         count);
  if (kind == Collective::kBroadcast && (root < 0 || root >= config_.size))
    fail(RR_ERR_INVALID_ARGUMENT, "broadcast on rank {}: root {} is out of range 0..{}",
         config_.rank, root, config_.size - 1);
  // In place as in NCCL: allgather's send is the rank's block of recv; reduce_scatter's
  // recv is the rank's block of send; the others' buffers are the same pointer.
  const auto* s = static_cast<const uint8_t*>(send);
  const auto* r = static_cast<const uint8_t*>(recv);
  const size_t myBlock = static_cast<size_t>(config_.rank) * count * es;
  const bool inPlaceAg = kind == Collective::kAllGather && s == r + myBlock;
  const bool inPlaceRs = kind == Collective::kReduceScatter && r == s + myBlock;
  const bool samePointer = send == recv && kind != Collective::kReduceScatter;
  if (count > 0 && !samePointer && !inPlaceAg && !inPlaceRs && s < r + recvBytes && r < s + sendBytes)
    fail(RR_ERR_INVALID_ARGUMENT,
         "{} on rank {}: send and receive buffers overlap without being in place (in place "
         "means send == recv; for allgather send == recv + rank * count, for reduce_scatter "
         "recv == send + rank * count)",
         name, config_.rank);

  // Where the buffers are: both host memory, or both memory of this communicator's GPU.
  int device = -1;
  if (config_.fakeDevice) {
    device = 0;
  } else if (count > 0) {
    const int sendDevice = pointerDevice(send);
    const int recvDevice = pointerDevice(recv);
    if (sendDevice != recvDevice)
      fail(RR_ERR_INVALID_ARGUMENT,
           "{} on rank {}: the send buffer is {} and the receive buffer is {}; both must be "
           "host memory or both memory of the same GPU",
           name, config_.rank, where(sendDevice), where(recvDevice));
    device = sendDevice;
  }
  if (stream != nullptr && !cudaBuilt() && !config_.fakeDevice)
    fail(RR_ERR_UNSUPPORTED,
         "{} on rank {}: a CUDA stream was given, but this build of ringreduce has no CUDA "
         "support (stream must be NULL)",
         name, config_.rank);
  // Device buckets are always ordered on a stream (NULL: the legacy default stream); host
  // buckets when a stream is given, on that stream's GPU.
  const bool ordered = stream != nullptr || device >= 0;
  if (ordered) {
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

  auto request = std::make_shared<Request>();
  request->desc = OpDesc{0, kind, dtype, reduces ? op : RR_SUM,
                         kind == Collective::kBroadcast ? root : 0, count};
  request->send = send;
  request->recv = recv;
  request->bytes = kind == Collective::kReduceScatter ? recvBytes : sendBytes;
  request->submitted = Clock::now();
  request->spin = std::chrono::microseconds(config_.spinUs);
  request->device = device;
  // Pushed to the queue under the same lock as its device work: the device runs passes' work
  // in the queue's order.
  auto push = [&] {
    if (queue_.push(request, quiet)) return;
    const std::string message =
        fmt::format("{} on rank {}: the communicator is being destroyed", name, config_.rank);
    request->complete(RR_ERR_INVALID_ARGUMENT, message);  // releases a held stream
    throw Error(RR_ERR_INVALID_ARGUMENT, message);
  };
  std::lock_guard<std::mutex> submitting(submitMutex_);
  if (!ordered) {
    push();
  } else {
    request->programBase = request->programEnd = programEnd_;
    if (device >= 0) {
      if (config_.size == 1)
        request->programEnd += count > 0 && send != recv && kind != Collective::kBroadcast ? 1 : 0;
      else {
        request->deviceSchedule = scheduleFor(kind, dtype, count, root, true);
        request->programEnd += static_cast<uint32_t>(RingSchedule(request->deviceSchedule).numUnits());
      }
      programEnd_ = request->programEnd;  // taken even if queueing fails: the values stay in step
    }
    bool pushed = false;
    try {
      streamOrder_->order(
          *request, stream, device >= 0 ? std::function<void()>([&] { queueDeviceWorkFor(*request); }) : nullptr,
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
  if (timeline_) timeline_->submitted(*request);
  return request;
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
  const RingSchedule schedule(r.deviceSchedule);
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

void Communicator::abort() { abort(fmt::format("rank {}: rr_comm_abort was called", config_.rank)); }

void Communicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!error_) error_ = std::make_pair(RR_ERR_ABORTED, reason);
  }
  aborted_ = true;
  if (waker_) waker_->wake();
  queue_.wake();
}

rr_result_t Communicator::asyncError() {
  auto e = stickyError();
  return e ? e->first : RR_SUCCESS;
}

}  // namespace rr
