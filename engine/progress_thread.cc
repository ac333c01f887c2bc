// The progress thread: takes collectives from the queue in submission order, agrees with
// the other ranks what each pass carries (engine/run/fusion_agreement.h), runs the pass
// (ProgressEngine), and
// completes the requests; on a failure, poisons the communicator (communicator.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "engine/communicator.h"
#include "engine/run/fusion_agreement.h"
#include "engine/run/fusion_group.h"
#include "engine/run/op_header.h"
#include "engine/observe/phase_stats.h"
#include "engine/run/progress_engine.h"
#include "engine/observe/stall_monitor.h"
#include "engine/run/stream_order.h"
#include "engine/observe/timeline.h"
#include "kernels/device.h"
#include "kernels/dtype.h"
#include "base/error.h"
#include "transport/link.h"

namespace rr {

void Communicator::progressLoop() {
  for (;;) {
    std::shared_ptr<Request> front = queue_.front(std::chrono::milliseconds(100), std::chrono::microseconds(config_.spinUs));
    // A caller running its blocking collective holds the engine: wait for it when there is
    // work, skip the idle duties when there is none (the caller's pass does them).
    std::unique_lock<std::mutex> engine(engineMutex_, std::defer_lock);
    if (front || queue_.closed())
      engine.lock();
    else if (!engine.try_lock())
      continue;
    sendAbortOnce();
    // The engine's stall: nothing after a pass that completed; after one that failed, where
    // it failed (rank 0 still answers other ranks' questions with it).
    if (monitor_) monitor_->poll(queue_.lastSubmitted(), engine_ ? stallState() : StallState{});
    front = queue_.peek();  // what a caller left (it may have run the one seen)
    if (!front) {
      if (queue_.closed()) return;
      // Idle: a neighbour's abort still reaches rr_comm_get_async_error and the next call.
      if (engine_ && !stickyError()) {
        try {
          engine_->pollIdle();
        } catch (const Error& e) {
          poison(e, queue_.lastSubmitted());
        }
      }
      continue;
    }
    turn(front);
  }
}

void Communicator::runHere(const std::shared_ptr<Request>& request) {
  sendAbortOnce();
  // A device bucket or a stream needs the GPU current on the thread that runs it: the
  // progress thread's, never the caller's.
  if (request->fusible() && queue_.peek() == request)
    turn(request);
  if (!request->done.load(std::memory_order_acquire)) queue_.announce();
}

void Communicator::turn(const std::shared_ptr<Request>& front) {
  if (auto e = stickyError()) {
    for (auto& r : queue_.pop(1)) finish(*r, e->first, e->second);
    return;
  }
  try {
    runNext(front);
  } catch (const Error& e) {
    poison(e, front->desc.seq);
    if (e.code() == RR_ERR_ABORTED) abortSent_ = true;
    const auto first = stickyError();  // the first error wins, an abort included
    for (auto& r : inFlight_) finish(*r, first->first, first->second);
  } catch (const DeviceError& e) {
    poison(Error(RR_ERR_CUDA, fmt::format("rank {}: {}", config_.rank, e.what())), front->desc.seq);
    const auto first = stickyError();
    for (auto& r : inFlight_) finish(*r, first->first, first->second);
  } catch (const std::exception& e) {
    const Error internal(RR_ERR_INTERNAL, std::string("internal error: ") + e.what());
    poison(internal, front->desc.seq);
    for (auto& r : inFlight_) finish(*r, internal.code(), internal.what());
  }
  inFlight_.clear();
}

void Communicator::runNext(const std::shared_ptr<Request>& front) {
  const Clock::time_point waitStart = Clock::now();
  current_ = front->desc;
  currentBytes_ = front->bytes;
  if (config_.size == 1) {
    auto ops = inFlight_ = queue_.pop(1);
    runLocal(*ops[0], prepare(*ops[0]));
    if (timeline_) timeline_->completed(*ops[0], ops);
    finish(*ops[0], RR_SUCCESS, "");
    return;
  }
  // What the pass carries (engine/run/fusion_agreement.h): the front alone, or a fused
  // group every rank has queued; a peer's decision is the pass's header.
  const PassDecision d = decidePass(*agreement_, queue_, engine_->waits(), config_.fusionBytes);
  inFlight_ = queue_.pop(d.count);
  runPass(inFlight_, d.header ? *d.header : passHeader(inFlight_, inFlight_.size()), d.left ? &*d.left : nullptr,
          waitStart);
}

void Communicator::runPass(const std::vector<std::shared_ptr<Request>>& ops, const GroupHeader& h,
                           const GroupHeader* leftHeader, Clock::time_point waitStart) {
  Request& first = *ops.front();
  const bool fused = ops.size() > 1;
  Device* device = fused ? nullptr : prepare(first);  // fused buckets are plain host memory
  const void* send = first.send;
  void* recv = first.recv;
  size_t count = first.desc.count;
  if (fused) {  // pack the buckets into the fusion buffer and all-reduce it in place
    send = recv = fusion_->pack(ops);
    count = 0;
    for (const auto& r : ops) count += r->desc.count;
  } else if (h.kind == Collective::kAllGather && count > 0 &&
             static_cast<const uint8_t*>(send) !=
                 static_cast<uint8_t*>(recv) + static_cast<size_t>(config_.rank) * first.bytes) {
    // (A device bucket's copy was queued at submission: queueDeviceWorkFor.)
    uint8_t* mine = static_cast<uint8_t*>(recv) + static_cast<size_t>(config_.rank) * first.bytes;
    if (device == nullptr) std::memcpy(mine, send, first.bytes);
  }

  // A device bucket runs the schedule its device work was queued for at submission.
  const ScheduleParams params =
      device != nullptr ? first.deviceSchedule : scheduleFor(h.kind, h.dtype, count, h.root, false);
  // This rank's header says which algorithm it runs; a left neighbour's that differs is
  // named by the engine (the settings differ between the ranks).
  GroupHeader mine = h;
  mine.algo = params.algo;
  mine.pairLink = params.pairLink;
  mine.device = device != nullptr;

  PassTimes times = engine_->run(Schedule(params), mine, leftHeader, send, recv, device, first.programBase);
  times.start = waitStart;
  if (fused) fusion_->unpack(ops);
  if (timeline_) timeline_->pass(ops, times);
  for (const auto& r : ops) {
    if (timeline_) timeline_->completed(*r, ops);
    finish(*r, RR_SUCCESS, "");
  }
  if (phases_) phases_->record(ops, times);
}

void Communicator::runLocal(const Request& r, Device* device) {
  // One rank: every reduction is a copy (AVG divides by one).
  if (r.desc.count == 0 || r.send == r.recv || r.desc.kind == Collective::kBroadcast) return;
  if (device != nullptr)
    waitDevice(*device, r);  // the copy was queued at submission (queueDeviceWorkFor)
  else
    std::memmove(r.recv, r.send, r.bytes);
}

StallState Communicator::stallState() const {
  StallState s = engine_->stall();
  s.kind = current_.kind;
  s.bytes = currentBytes_;
  return s;
}

void Communicator::finish(Request& r, rr_result_t code, std::string message) {
  // Counted before the caller can see it: a destroy right after rr_wait cancels nothing.
  uint64_t seen = finished_.load();
  while (seen < r.desc.seq && !finished_.compare_exchange_weak(seen, r.desc.seq)) {
  }
  r.complete(code, std::move(message));
}

void Communicator::onIdle() {
  if (monitor_) monitor_->poll(queue_.lastSubmitted(), stallState());
}

}  // namespace rr
