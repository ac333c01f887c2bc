// ProgressEngine; see progress_engine.h, and pass.h for the counters and their rules.
#include "engine/run/progress_engine.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <optional>
#include <thread>

#include "engine/run/device_pass.h"
#include "engine/run/host_pass.h"

namespace rr {

ProgressEngine::ProgressEngine(Agreement& agreement, EventSet& events, size_t segmentBytes, int timeoutMs,
                               std::chrono::microseconds spin, std::function<void()> onIdle,
                               const std::atomic<bool>* aborted)
    : agreement_(agreement),
      events_(events),
      rank_(agreement.rank()),
      size_(agreement.size()),
      segmentBytes_(segmentBytes),
      timeoutMs_(timeoutMs),
      spin_(spin),
      onIdle_(std::move(onIdle)),
      aborted_(aborted),
      lastIdle_(Clock::now()),
      reduce_(bestReducer()),
      scale_(bestScaler()) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, (PassShape::kInSlots + PassShape::kOutSlots) * segmentBytes_) != 0)
    fail(RR_ERR_SYSTEM, "cannot allocate {} bytes of staging",
         (PassShape::kInSlots + PassShape::kOutSlots) * segmentBytes_);
  staging_ = static_cast<uint8_t*>(p);
}

ProgressEngine::~ProgressEngine() {
  std::free(staging_);
  if (devStaging_ != nullptr) device_->freeStaging(devStaging_);
}

void ProgressEngine::attachDevice(Device* device) {
  if (device_ == device) return;
  if (device_ != nullptr)
    fail(RR_ERR_INTERNAL, "rank {}: the engine's device changed from {} to {}", rank_, device_->describe(),
         device->describe());
  devStaging_ = static_cast<uint8_t*>(
      device->allocStaging((2 * PassShape::kInSlots + PassShape::kOutSlots) * segmentBytes_));
  device_ = device;
}

void ProgressEngine::checkAborted() const {
  if (aborted_ != nullptr && aborted_->load(std::memory_order_relaxed))
    fail(RR_ERR_ABORTED, "rank {}: rr_comm_abort was called", rank_);
}

HeaderWaits ProgressEngine::waits() {
  return HeaderWaits{[this](const OpDesc& next) { return awaitHeader(next); },
                     [this](const GroupHeader& proposal) { sendProposal(proposal); }};
}

Heard ProgressEngine::awaitHeader(const OpDesc& next) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point until = deadline();
  for (;;) {
    if (std::optional<Heard> heard = agreement_.nextHeader()) {
      stalledOn(0, WaitingOn::kNothing, {});
      return *heard;
    }
    if (progressLinks(next.seq)) continue;
    stalledOn(next.seq, WaitingOn::kLeft, start);
    if (Clock::now() >= until)
      timeout(describeOp(next) + (agreement_.links().size() == 2
                                      ? ": waiting for the left neighbour to start it"
                                      : ": waiting for the left neighbour or a recursive doubling or "
                                        "halving-doubling partner to start it"),
              true, 0, 1);
    wait(until, start);
  }
}

void ProgressEngine::sendProposal(const GroupHeader& proposal) {
  const uint64_t sent = agreement_.postProposal(proposal);
  const Clock::time_point start = Clock::now();
  const Clock::time_point until = deadline();
  while (!agreement_.sent(sent)) {
    if (progressLinks(proposal.firstSeq)) continue;
    stalledOn(proposal.firstSeq, WaitingOn::kRight, start);
    if (Clock::now() >= until) timeout(describeOp(proposal.opAt(0)) + ": sending the fusion proposal", false, 0, 1);
    wait(until, start);
  }
  stalledOn(0, WaitingOn::kNothing, {});
}

PassTimes ProgressEngine::run(const Schedule& s, const GroupHeader& h, const GroupHeader* leftHeader,
                              const void* send, void* recv, Device* device, uint32_t deviceBase) {
  if (device != nullptr && device != device_)
    fail(RR_ERR_INTERNAL, "rank {}: a device pass before the device was attached", rank_);
  agreement_.open(h, s.usesPartners(), leftHeader);
  const PassArgs args{s, agreement_, h.dtype, h.op, size_, send, recv,
                      device != nullptr ? devStaging_ : staging_, segmentBytes_};
  // On the stack: a pass allocates nothing.
  std::optional<DevicePass> devicePass;
  std::optional<HostPass> hostPass;
  Pass& pass = device != nullptr ? static_cast<Pass&>(devicePass.emplace(args, *device, deviceBase))
                                 : hostPass.emplace(args, reduce_, scale_);
  PassTimes times;
  times.start = times.peers = times.reduced = Clock::now();
  const size_t n = s.numUnits();
  PassCounters c;
  Clock::time_point lastMoved = Clock::now();
  Clock::time_point until = deadline();
  while (c.recvDone < n || c.sendDone < n || !agreement_.settled()) {
    checkAborted();
    if (step(pass, s, c, times, h.firstSeq)) {
      lastMoved = Clock::now();
      until = lastMoved + std::chrono::milliseconds(timeoutMs_);
      stall_.on = WaitingOn::kNothing;
      continue;
    }
    idleRound(pass, s, c, h, lastMoved, until);
  }
  stalledOn(0, WaitingOn::kNothing, {});
  agreement_.close(h.firstSeq + h.numOps - 1);
  times.end = Clock::now();
  if (s.reduceEnd() == 0) times.reduced = times.peers;
  return times;
}

bool ProgressEngine::step(Pass& pass, const Schedule& s, PassCounters& c, PassTimes& times, uint64_t seq) {
  const size_t n = s.numUnits();
  bool moved = pass.postSends(c);
  moved |= agreement_.pollPartners(s, c);
  moved |= pass.postRecvs(c);  // the agreement's gates hold back a peer's data until its header
  if (testPauseMs_ > 0 && c.sendPosted == n && c.sendDone < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(testPauseMs_));  // a slow rank
    testPauseMs_ = 0;
  }
  moved |= progressLinks(seq);
  const bool leftBefore = agreement_.leftChecked();
  moved |= agreement_.pollLeft();
  if (!leftBefore && agreement_.leftChecked()) times.peers = Clock::now();
  const size_t before = c.recvDone;
  moved |= pass.completeRecvs(c);
  if (before < s.reduceEnd() && c.recvDone >= s.reduceEnd()) times.reduced = Clock::now();
  moved |= pass.completeSends(c);
  assert(c.recvPosted >= c.recvDone && c.sendPosted >= c.sendDone);
  return moved;
}

void ProgressEngine::idleRound(Pass& pass, const Schedule& s, const PassCounters& c, const GroupHeader& h,
                               Clock::time_point lastMoved, Clock::time_point until) {
  const size_t n = s.numUnits();
  const bool devicePending = pass.devicePending(c);
  const bool receiving = !agreement_.leftChecked() || c.recvDone < n;
  // The rank this one waits for (the stall monitor follows it): a partner, else the left
  // neighbour for data, the right one to take it.
  stalledOn(h.firstSeq, devicePending ? WaitingOn::kDevice : receiving ? WaitingOn::kLeft : WaitingOn::kRight,
            lastMoved, devicePending ? -1 : agreement_.awaited(s, c));
  if (Clock::now() >= until) {
    const std::string what =
        describeOp(h.opAt(0)) + (h.numOps > 1 ? fmt::format(" (fused with {} more)", h.numOps - 1) : "");
    if (const std::string stalled = pass.stalledOnDevice(c); !stalled.empty()) {
      agreement_.throwPendingAbort();
      fail(RR_ERR_TIMEOUT, "{}: no progress for {} ms on rank {}: {}", what, timeoutMs_, rank_, stalled);
    }
    const bool partners = agreement_.usingPartners();
    const int partner = partners ? agreement_.awaited(s, c) : -1;
    timeout(what, partners ? c.recvDone < n : receiving, receiving ? c.recvDone : c.sendDone, n, partner, s.algo());
  }
  // Device work has no fd to wake the wait: poll instead of sleeping while it runs.
  wait(until, lastMoved, devicePending);
}

void ProgressEngine::idleDuties() {
  if (onIdle_ && Clock::now() - lastIdle_ >= std::chrono::milliseconds(100)) {
    lastIdle_ = Clock::now();
    onIdle_();
  }
}

void ProgressEngine::wait(Clock::time_point until, Clock::time_point since, bool devicePending) {
  checkAborted();
  idleDuties();
  // Within the spin window after the last progress, only look (a sleeping thread's wake-up
  // costs tens of microseconds, on a virtual machine most of a small collective's time);
  // device work completes without an fd to wait on: poll the links and come back.
  const bool spin = spin_.count() > 0 && Clock::now() - since < spin_;
  const bool look = devicePending || spin;
  const int ms = look ? 0 : std::min(msUntil(until) + 1, 100);
  const int n = events_.dispatch(ms);
  agreement_.dispatched();
  if (look && n == 0) std::this_thread::yield();
  checkAborted();
}

void ProgressEngine::stalledOn(uint64_t seq, WaitingOn on, Clock::time_point since, int peer) {
  if (on == WaitingOn::kNothing) {
    stall_ = StallState{};
    return;
  }
  if (stall_.seq != seq || stall_.on != on) {
    stall_.seq = seq;
    stall_.on = on;
    stall_.since = since;
    stall_.gpu = device_ != nullptr ? device_->ordinal() : -1;
  }
  stall_.peer = peer;
}

void ProgressEngine::timeout(const std::string& what, bool waitingForLeft, size_t done, size_t total, int partner,
                             Algorithm algo) {
  agreement_.throwPendingAbort();
  const char* role = algo == Algorithm::kHd ? "halving-doubling" : "recursive doubling";
  // Rank 0's view of who holds the job up leads the message when it has one. Without one
  // (rank 0 gone or frozen), a neighbour's abort that comes within a short grace carries the
  // first failure, with the cause its rank saw: every rank then reports the same one. Rank 0
  // may be failing too, and answer only when it is done: the links are watched meanwhile,
  // and a neighbour's abort ends the wait (it carries the first failure).
  const StallCause explained =
      explain_ ? explain_(stall_, [this] { agreement_.watch(stall_.seq); }) : StallCause{};
  std::string cause = explained.text;
  const bool weak = cause.empty() || !explained.answered;
  const auto grace = Clock::now() + std::chrono::milliseconds(weak ? std::clamp(timeoutMs_ / 4, 10, 500) : 0);
  do {
    try {
      progressLinks(stall_.seq);
    } catch (const Error& e) {
      if (e.origin() >= 0) throw;
      break;  // the neighbour is gone: this rank's own view is all there is
    }
    agreement_.throwPendingAbort();
    if (Clock::now() < grace) wait(grace, Clock::time_point{});
  } while (Clock::now() < grace);
  if (!cause.empty()) cause += "; ";
  const std::string head = fmt::format("{}: {}no progress for {} ms on rank {}", what, cause, timeoutMs_, rank_);
  if (partner >= 0 && waitingForLeft)
    fail(RR_ERR_TIMEOUT, "{}: waiting for data from rank {} ({} partner); {} of {} segments received", head,
         partner, role, done, total);
  if (partner >= 0)
    fail(RR_ERR_TIMEOUT, "{}: waiting for rank {} ({} partner) to take data; {} of {} segments sent", head, partner,
         role, done, total);
  if (waitingForLeft)
    fail(RR_ERR_TIMEOUT, "{}: waiting for data from rank {} (left neighbour); {} of {} segments received", head,
         agreement_.leftRank(), done, total);
  fail(RR_ERR_TIMEOUT, "{}: waiting for rank {} (right neighbour) to take data; {} of {} segments sent", head,
       agreement_.rightRank(), done, total);
}

}  // namespace rr
