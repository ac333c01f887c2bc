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

#include "engine/setup/bootstrap.h"
#include "engine/run/device_pass.h"
#include "engine/run/agreement.h"
#include "engine/run/fusion_group.h"
#include "engine/run/op_header.h"
#include "engine/observe/phase_stats.h"
#include "engine/run/progress_engine.h"
#include "engine/observe/stall_monitor.h"
#include "engine/run/stream_order.h"
#include "engine/observe/timeline.h"
#include "engine/run/waker.h"
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
    : config_(std::move(config)), log_(std::move(log)) {
  facts_.rank = config_.rank;
  facts_.size = config_.size;
  facts_.algo = config_.algo;
  facts_.segmentBytes = config_.segmentBytes;
}

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
  // The links go before the engine and the agreement: a transport that moves bytes on its
  // own (UCX) may hold requests on the engine's staging and the agreement's header receives
  // until they are closed.
  left_.reset();
  right_.reset();
  partners_.clear();
  agreement_.reset();
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
  facts_.pulledFrames = ring.largeFrames;
  facts_.fragmentFrames = ring.fragmentFrames;
  facts_.span = ring.oneHost ? Span::kOneHost : Span::kHosts;
  if (config_.size > 1)
    log_->info("the job's ranks {}: auto takes recursive doubling up to {} KiB",
               ring.oneHost ? "share one host" : "are on more than one host",
               rdMaxBytes(config_.size, facts_.span) >> 10);
  if (facts_.pulledFrames)
    log_->info("every link of the job reads its peers' frames: segments of {} KiB and more",
               kPulledSegmentBytes >> 10);
  if (facts_.fragmentFrames && config_.segmentBytes > Link::kFragmentFrameBytes)
    log_->info("every link of the job copies frames through 256 KiB fragments: "
               "ring passes cut segments of at most {} KiB (RR_SEGMENT_BYTES {} KiB)",
               Link::kFragmentFrameBytes >> 10, config_.segmentBytes >> 10);
  waker_ = std::make_unique<Waker>(*events_);
  std::vector<Link*> partners;
  for (const auto& p : partners_) partners.push_back(p.get());
  agreement_ = std::make_unique<Agreement>(config_.rank, config_.size, *left_, *right_, std::move(partners),
                                           *events_, config_.timeoutMs);
  engine_ = std::make_unique<ProgressEngine>(*agreement_, *events_, config_.segmentBytes, config_.timeoutMs,
                                             std::chrono::microseconds(config_.spinUs), [this] { onIdle(); },
                                             &aborted_);
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

std::shared_ptr<Request> Communicator::submitBarrier(bool quiet) {
  // Its own kind in the op header; it runs as an all-reduce with one element per block, so
  // every rank's result depends on every rank. Concurrent barriers share the buffer
  // harmlessly: every result is zero.
  return submit(Collective::kBarrier, barrierBuf_.get(), barrierBuf_.get(),
                static_cast<size_t>(config_.size), RR_UINT8, RR_MAX, 0, nullptr, quiet);
}

std::pair<size_t, size_t> Communicator::checkBuffers(Collective kind, const void* send, void* recv, size_t count,
                                                     size_t es, int root, const char* name) const {
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
  return {sendBytes, recvBytes};
}

std::shared_ptr<Request> Communicator::submit(Collective kind, const void* send, void* recv,
                                              size_t count, rr_dtype_t dtype, rr_op_t op,
                                              int root, void* stream, bool quiet) {
  const char* name = collectiveName(kind);
  if (auto e = stickyError()) throw Error(e->first, e->second);
  const bool reduces = kind == Collective::kAllReduce || kind == Collective::kReduceScatter ||
                       kind == Collective::kBarrier;
  checkDtypeOp(dtype, op, reduces);
  const auto [sendBytes, recvBytes] = checkBuffers(kind, send, recv, count, dtypeSize(dtype), root, name);
  // Device buckets are always ordered on a stream (NULL: the legacy default stream); host
  // buckets when a stream is given, on that stream's GPU (device_submit.cc).
  const int device = bufferDevice(send, recv, count, name);
  const bool ordered = stream != nullptr || device >= 0;
  if (ordered) openDeviceFor(stream, device, name);

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
  if (ordered)
    orderOnStream(*request, stream, push, name);
  else
    push();
  if (timeline_) timeline_->submitted(*request);
  return request;
}

}  // namespace rr
