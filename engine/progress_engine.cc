// ProgressEngine; see progress_engine.h for the counters and their rules.
#include "engine/progress_engine.h"

#include <sys/epoll.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

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

ProgressEngine::~ProgressEngine() {
  std::free(staging_);
  if (devStaging_ != nullptr) device_->freeStaging(devStaging_);
}

void ProgressEngine::attachDevice(Device* device) {
  if (device_ == device) return;
  if (device_ != nullptr)
    fail(RR_ERR_INTERNAL, "rank {}: the engine's device changed from {} to {}", rank_,
         device_->describe(), device->describe());
  devStaging_ = static_cast<uint8_t*>(device->allocStaging((2 * kInSlots + kOutSlots) * segmentBytes_));
  device_ = device;
}

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
                              void* recv, Device* device) {
  if (pendingAbort_) throw *pendingAbort_;
  if (device != nullptr && device != device_)
    fail(RR_ERR_INTERNAL, "rank {}: a device pass before the device was attached", rank_);
  const bool onDevice = device != nullptr;
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
    bool moved = onDevice ? postSendsDevice(s, c, h.dtype, send, recv)
                          : postSends(s, c, h.dtype, send, recv);
    if (headerOk) moved |= onDevice ? postRecvsDevice(s, c, h.dtype) : postRecvs(s, c, h.dtype, recv);
    moved |= progressLinks(h.firstSeq);
    if (!headerOk && left_->recvsDone() > headerRecvMsg) {
      if (std::memcmp(sentHeader_, leftHeader_, sizeof sentHeader_) != 0)
        fail(RR_ERR_INTERNAL, "{}: the op header came back to rank 0 changed",
             describeOp(h.opAt(0)));
      headerOk = moved = true;
      times.peers = Clock::now();
    }
    const size_t before = c.recvDone;
    moved |= onDevice ? completeRecvsDevice(s, c, h, send, recv) : completeRecvs(s, c, h, send, recv);
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
      // Device work the pass waits for (a landed segment's kernel or copy, the copy of the
      // next send) has no fd to wake the wait: poll instead of sleeping.
      const bool devicePending = onDevice && (c.recvLanded > c.recvDone ||
                                              (c.sendPosted < c.sendStaged && s.unit(c.sendPosted).dependsOn < 0));
      wait(until, devicePending);
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

bool ProgressEngine::postSendsDevice(const RingSchedule& s, Counters& c, rr_dtype_t dtype,
                                     const void* send, const void* recv) {
  const size_t es = dtypeSize(dtype);
  bool moved = false;
  // Copy what the ring's first steps send from the user's buffer into send-slots, ahead.
  while (c.sendStaged < s.numUnits() && c.sendStaged < c.sendDone + kInSlots) {
    const size_t k = c.sendStaged;
    const Unit u = s.unit(k);
    uint64_t ticket = 0;
    if (u.sendFrom != Buffer::kNone && u.dependsOn < 0) {
      if (u.sendFrom == Buffer::kStage)
        fail(RR_ERR_INTERNAL, "unit {} sends a staging slot without a dependency", k);
      const auto* base = static_cast<const uint8_t*>(u.sendFrom == Buffer::kSend ? send : recv);
      ticket = device_->copy(devSendSlot(k), base + u.sendOffset * es, u.sendCount * es);
    }
    sendTicket_[k % kRing] = ticket;
    ++c.sendStaged;
    moved = true;
  }
  while (c.sendPosted < c.sendStaged) {
    const size_t k = c.sendPosted;
    const Unit u = s.unit(k);
    if (u.dependsOn >= 0) {
      // A forwarded all-gather segment is ready once it landed; a reduced one once its
      // kernel finished.
      const size_t j = static_cast<size_t>(u.dependsOn);
      const bool ready = s.unit(j).reduce ? c.recvDone > j : c.recvLanded > j;
      if (!ready) break;
    } else if (!device_->finished(sendTicket_[k % kRing])) {
      break;
    }
    if (u.sendFrom != Buffer::kNone) {
      const uint8_t* from = u.dependsOn < 0 ? devSendSlot(k) : resultSlot(s, static_cast<size_t>(u.dependsOn));
      right_->postSend(from, u.sendCount * es, FrameType::kData);
    }
    sendMsgAfter_[k % kRing] = right_->sendsPosted();
    ++c.sendPosted;
    moved = true;
  }
  return moved;
}

bool ProgressEngine::postRecvsDevice(const RingSchedule& s, Counters& c, rr_dtype_t dtype) {
  const size_t es = dtypeSize(dtype);
  const size_t depth = static_cast<size_t>(s.depth());
  bool moved = false;
  while (c.recvPosted < s.numUnits() && c.recvPosted < c.recvDone + kInSlots) {
    const size_t k = c.recvPosted;
    // Slot k % 8 held unit k - 8's result, forwarded by the send of unit k - 8 + depth
    // (or earlier, for a broadcast chain).
    if (k + depth >= kInSlots && c.sendDone <= k + depth - kInSlots) break;
    const Unit u = s.unit(k);
    if (u.recvInto != Buffer::kNone) left_->postRecv(devInSlot(k), u.recvCount * es, FrameType::kData);
    recvMsgAfter_[k % kRing] = left_->recvsPosted();
    ++c.recvPosted;
    moved = true;
  }
  return moved;
}

bool ProgressEngine::completeRecvsDevice(const RingSchedule& s, Counters& c, const GroupHeader& h,
                                         const void* send, void* recv) {
  const size_t es = dtypeSize(h.dtype);
  const size_t depth = static_cast<size_t>(s.depth());
  bool moved = false;
  while (c.recvLanded < c.recvPosted && left_->recvsDone() >= recvMsgAfter_[c.recvLanded % kRing]) {
    const size_t k = c.recvLanded;
    const Unit u = s.unit(k);
    uint64_t ticket = 0;
    if (u.recvInto != Buffer::kNone) {
      uint8_t* user = static_cast<uint8_t*>(recv) + u.recvOffset * es;
      if (u.reduce) {
        // Write the out-slot only when the next step forwards this result.
        bool forwarded = false;
        if (k + depth < s.numUnits()) {
          const Unit next = s.unit(k + depth);
          forwarded = next.dependsOn == static_cast<int64_t>(k) && next.sendFrom != Buffer::kNone;
        }
        const bool staged = u.recvInto == Buffer::kStage;
        uint8_t* dst = staged ? devOutSlot(k) : user;
        ticket = device_->reduceCopyOut(dst, static_cast<const uint8_t*>(send) + u.reduceOffset * es,
                                        devInSlot(k), staged || !forwarded ? nullptr : devOutSlot(k),
                                        u.recvCount, h.dtype, h.op,
                                        u.lastReduce && h.op == RR_AVG ? size_ : 0);
      } else {
        ticket = device_->copy(user, devInSlot(k), u.recvCount * es);
      }
    }
    recvTicket_[k % kRing] = ticket;
    ++c.recvLanded;
    moved = true;
  }
  while (c.recvDone < c.recvLanded && device_->finished(recvTicket_[c.recvDone % kRing])) {
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

void ProgressEngine::wait(Clock::time_point until, bool devicePending) {
  checkAborted();
  if (onIdle_ && Clock::now() - lastIdle_ >= std::chrono::milliseconds(100)) {
    lastIdle_ = Clock::now();
    onIdle_();
  }
  epoll_event events[16];
  // Device work completes without an fd to wait on: poll the sockets and come back.
  const int ms = devicePending ? 0 : std::min(msUntil(until) + 1, 100);
  int n = ::epoll_wait(epollFd_, events, 16, ms);
  if (n < 0 && errno != EINTR) failErrno(errno, "epoll_wait");
  for (int i = 0; i < n; ++i) static_cast<EventTarget*>(events[i].data.ptr)->onEvent(events[i].events);
  if (devicePending && n == 0) std::this_thread::yield();
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
