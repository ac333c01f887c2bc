// ProgressEngine; see progress_engine.h for the counters and their rules.
#include "engine/progress_engine.h"

#include <sys/epoll.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernels/dtype.h"

namespace rr {

ProgressEngine::ProgressEngine(int rank, int size, Link* left, Link* right, int epollFd,
                               size_t segmentBytes, int timeoutMs, std::function<void()> onIdle,
                               const std::atomic<bool>* aborted)
    : rank_(rank),
      size_(size),
      left_(left),
      right_(right),
      epollFd_(epollFd),
      segmentBytes_(segmentBytes),
      timeoutMs_(timeoutMs),
      onIdle_(std::move(onIdle)),
      aborted_(aborted),
      lastIdle_(Clock::now()),
      reduce_(bestReducer()) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, (kInSlots + kOutSlots) * segmentBytes_) != 0)
    fail(RR_ERR_SYSTEM, "cannot allocate {} bytes of staging", (kInSlots + kOutSlots) * segmentBytes_);
  staging_ = static_cast<uint8_t*>(p);
}

ProgressEngine::~ProgressEngine() { std::free(staging_); }

void ProgressEngine::checkAborted() const {
  if (aborted_ != nullptr && aborted_->load(std::memory_order_relaxed))
    fail(RR_ERR_ABORTED, "rank {}: rr_comm_abort was called", rank_);
}

Clock::time_point ProgressEngine::deadline() const {
  return Clock::now() + std::chrono::milliseconds(timeoutMs_);
}

GroupHeader ProgressEngine::receiveHeader(const OpDesc& next) {
  if (pendingAbort_) throw *pendingAbort_;
  const uint64_t index = left_->recvsPosted();
  left_->postRecv(leftHeader_, sizeof leftHeader_, FrameType::kOpHeader);
  Clock::time_point until = deadline();
  while (left_->recvsDone() <= index) {
    if (progressLinks(next.seq)) continue;
    if (Clock::now() >= until)
      timeout(describeOp(next) + ": waiting for the left neighbour to start it", true, 0, 1);
    wait(until);
  }
  return GroupHeader::decode(leftHeader_, (rank_ - 1 + size_) % size_);
}

void ProgressEngine::sendHeader(const GroupHeader& header) {
  header.encode(sentHeader_);
  const uint64_t index = right_->sendsPosted();
  right_->postSend(sentHeader_, sizeof sentHeader_, FrameType::kOpHeader);
  Clock::time_point until = deadline();
  while (right_->sendsDone() <= index) {
    if (progressLinks(header.firstSeq)) continue;
    if (Clock::now() >= until)
      timeout(describeOp(header.opAt(0)) + ": sending the fusion proposal", false, 0, 1);
    wait(until);
  }
}

PassTimes ProgressEngine::run(const RingSchedule& s, const GroupHeader& h, const void* send,
                              void* recv) {
  if (pendingAbort_) throw *pendingAbort_;
  PassTimes times;
  times.start = times.peers = times.reduced = Clock::now();
  const uint64_t headerSendMsg = right_->sendsPosted();
  h.encode(sentHeader_);
  right_->postSend(sentHeader_, sizeof sentHeader_, FrameType::kOpHeader);
  bool headerOk = rank_ != 0;  // others checked it before forwarding
  uint64_t headerRecvMsg = 0;
  if (!headerOk) {
    headerRecvMsg = left_->recvsPosted();
    left_->postRecv(leftHeader_, sizeof leftHeader_, FrameType::kOpHeader);
  }

  const size_t n = s.numUnits();
  const size_t reduceEnd = s.reduceEnd();
  Counters c;
  Clock::time_point until = deadline();
  while (c.recvDone < n || c.sendDone < n || !headerOk || right_->sendsDone() <= headerSendMsg) {
    checkAborted();
    bool moved = postSends(s, c, h.dtype, send, recv);
    if (headerOk) moved |= postRecvs(s, c, h.dtype, recv);
    moved |= progressLinks(h.firstSeq);
    if (!headerOk && left_->recvsDone() > headerRecvMsg) {
      if (std::memcmp(sentHeader_, leftHeader_, sizeof sentHeader_) != 0)
        fail(RR_ERR_INTERNAL, "{}: the op header came back to rank 0 changed",
             describeOp(h.opAt(0)));
      headerOk = moved = true;
      times.peers = Clock::now();
    }
    const size_t before = c.recvDone;
    moved |= completeRecvs(s, c, h, send, recv);
    if (before < reduceEnd && c.recvDone >= reduceEnd) times.reduced = Clock::now();
    while (c.sendDone < c.sendPosted && right_->sendsDone() >= sendMsgAfter_[c.sendDone % kRing]) {
      ++c.sendDone;
      moved = true;
    }
    assert(c.recvPosted >= c.recvDone && c.sendPosted >= c.sendDone);
    if (moved) {
      until = deadline();
    } else if (Clock::now() >= until) {
      const bool left = !headerOk || c.recvDone < n;
      timeout(describeOp(h.opAt(0)) + (h.numOps > 1 ? fmt::format(" (fused with {} more)", h.numOps - 1) : ""),
              left, left ? c.recvDone : c.sendDone, n);
    } else {
      wait(until);
    }
  }
  times.end = Clock::now();
  if (reduceEnd == 0) times.reduced = times.peers;
  return times;
}

bool ProgressEngine::postSends(const RingSchedule& s, Counters& c, rr_dtype_t dtype,
                               const void* send, void* recv) {
  const size_t es = dtypeSize(dtype);
  bool moved = false;
  while (c.sendPosted < s.numUnits() && c.sendPosted - c.sendDone < kInSlots) {
    const Unit u = s.unit(c.sendPosted);
    if (u.dependsOn >= 0 && c.recvDone <= static_cast<size_t>(u.dependsOn)) break;
    if (u.sendFrom != Buffer::kNone) {
      const uint8_t* from = u.sendFrom == Buffer::kSend   ? static_cast<const uint8_t*>(send) + u.sendOffset * es
                            : u.sendFrom == Buffer::kRecv ? static_cast<uint8_t*>(recv) + u.sendOffset * es
                                                          : outSlot(u.sendOffset);
      right_->postSend(from, u.sendCount * es, FrameType::kData);
    }
    sendMsgAfter_[c.sendPosted % kRing] = right_->sendsPosted();
    ++c.sendPosted;
    moved = true;
  }
  return moved;
}

bool ProgressEngine::postRecvs(const RingSchedule& s, Counters& c, rr_dtype_t dtype, void* recv) {
  const size_t es = dtypeSize(dtype);
  const size_t depth = static_cast<size_t>(s.depth());
  bool moved = false;
  while (c.recvPosted < s.numUnits() && c.recvPosted < c.recvDone + kInSlots) {
    const size_t k = c.recvPosted;
    const Unit u = s.unit(k);
    // The out-slot this unit fills was last read by the send of unit k - kOutSlots + depth.
    if (u.recvInto == Buffer::kStage && k + depth >= kOutSlots && c.sendDone <= k + depth - kOutSlots)
      break;
    if (u.recvInto != Buffer::kNone) {
      uint8_t* into = u.reduce ? inSlot(k) : static_cast<uint8_t*>(recv) + u.recvOffset * es;
      left_->postRecv(into, u.recvCount * es, FrameType::kData);
    }
    recvMsgAfter_[k % kRing] = left_->recvsPosted();
    ++c.recvPosted;
    moved = true;
  }
  return moved;
}

bool ProgressEngine::completeRecvs(const RingSchedule& s, Counters& c, const GroupHeader& h,
                                   const void* send, void* recv) {
  const size_t es = dtypeSize(h.dtype);
  bool moved = false;
  while (c.recvDone < c.recvPosted && left_->recvsDone() >= recvMsgAfter_[c.recvDone % kRing]) {
    const Unit u = s.unit(c.recvDone);
    if (u.recvInto != Buffer::kNone && u.reduce) {
      uint8_t* dst = u.recvInto == Buffer::kStage ? outSlot(u.recvOffset)
                                                  : static_cast<uint8_t*>(recv) + u.recvOffset * es;
      const uint8_t* mine = static_cast<const uint8_t*>(send) + u.reduceOffset * es;
      reduce_(dst, mine, inSlot(c.recvDone), u.recvCount, h.dtype, h.op);
      if (u.lastReduce && h.op == RR_AVG) finalizeAvg(dst, u.recvCount, h.dtype, size_);
    }
    ++c.recvDone;
    moved = true;
  }
  return moved;
}

bool ProgressEngine::progressLinks(uint64_t seq) {
  bool moved = false;
  for (Link* link : {right_, left_}) {
    try {
      moved |= link->progress();
    } catch (const Error& e) {
      if (e.origin() < 0 || e.seq() <= seq || pendingAbort_) throw;
      pendingAbort_ = e;
      moved = true;
    }
  }
  return moved;
}

void ProgressEngine::wait(Clock::time_point until) {
  checkAborted();
  if (onIdle_ && Clock::now() - lastIdle_ >= std::chrono::milliseconds(100)) {
    lastIdle_ = Clock::now();
    onIdle_();
  }
  epoll_event events[16];
  const int ms = std::min(msUntil(until) + 1, 100);
  int n = ::epoll_wait(epollFd_, events, 16, ms);
  if (n < 0 && errno != EINTR) failErrno(errno, "epoll_wait");
  for (int i = 0; i < n; ++i) static_cast<EventTarget*>(events[i].data.ptr)->onEvent(events[i].events);
  checkAborted();
}

void ProgressEngine::timeout(const std::string& what, bool waitingForLeft, size_t done,
                             size_t total) {
  if (pendingAbort_) throw *pendingAbort_;
  const int left = (rank_ - 1 + size_) % size_;
  const int right = (rank_ + 1) % size_;
  if (waitingForLeft)
    fail(RR_ERR_TIMEOUT,
         "{}: no progress for {} ms on rank {}: waiting for data from rank {} (left neighbour); "
         "{} of {} segments received",
         what, timeoutMs_, rank_, left, done, total);
  fail(RR_ERR_TIMEOUT,
       "{}: no progress for {} ms on rank {}: waiting for rank {} (right neighbour) to take data; "
       "{} of {} segments sent",
       what, timeoutMs_, rank_, right, done, total);
}

}  // namespace rr
