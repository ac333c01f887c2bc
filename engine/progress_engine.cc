// ProgressEngine; see progress_engine.h for the counters and their rules.
#include "engine/progress_engine.h"

#include <sys/epoll.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <new>

#include "kernels/dtype.h"
#include "transport/error.h"
#include "transport/wire.h"

namespace rr {
namespace {

void encodeHeader(const OpDesc& op, uint8_t* p) {
  wire::put64(p, op.seq);
  wire::put32(p + 8, static_cast<uint32_t>(op.kind));
  wire::put32(p + 12, static_cast<uint32_t>(op.dtype));
  wire::put32(p + 16, static_cast<uint32_t>(op.op));
  wire::put32(p + 20, static_cast<uint32_t>(op.root));
  wire::put64(p + 24, op.count);
}

std::string describeOp(uint64_t seq, uint32_t kind, uint32_t dtype, uint32_t op, int root,
                       uint64_t count) {
  std::string s = fmt::format("op #{} {}(count={}, dtype={}", seq,
                              kind <= 3 ? collectiveName(static_cast<Collective>(kind)) : "?",
                              count, dtypeName(static_cast<rr_dtype_t>(dtype)));
  if (kind == static_cast<uint32_t>(Collective::kAllReduce) ||
      kind == static_cast<uint32_t>(Collective::kReduceScatter))
    s += fmt::format(", op={}", opName(static_cast<rr_op_t>(op)));
  if (kind == static_cast<uint32_t>(Collective::kBroadcast)) s += fmt::format(", root={}", root);
  return s + ")";
}

}  // namespace

ProgressEngine::ProgressEngine(int rank, int size, Link* left, Link* right, int epollFd,
                               size_t segmentBytes, int timeoutMs)
    : rank_(rank),
      size_(size),
      left_(left),
      right_(right),
      epollFd_(epollFd),
      segmentBytes_(segmentBytes),
      timeoutMs_(timeoutMs),
      reduce_(bestReducer()) {
  if (size_ > 1) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, (kInSlots + kOutSlots) * segmentBytes_) != 0)
      fail(RR_ERR_SYSTEM, "cannot allocate {} bytes of staging", (kInSlots + kOutSlots) * segmentBytes_);
    staging_ = static_cast<uint8_t*>(p);
  }
}

ProgressEngine::~ProgressEngine() { std::free(staging_); }

void ProgressEngine::run(const RingSchedule& s, const OpDesc& op, const void* send, void* recv) {
  if (pendingAbort_) throw *pendingAbort_;
  const uint64_t headerSendMsg = right_->sendsPosted();
  encodeHeader(op, myHeader_);
  right_->postSend(myHeader_, sizeof myHeader_, FrameType::kOpHeader);
  headerRecvMsg_ = left_->recvsPosted();
  left_->postRecv(leftHeader_, sizeof leftHeader_, FrameType::kOpHeader);
  headerOk_ = false;

  const size_t n = s.numUnits();
  Counters c;
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs_);
  while (c.recvDone < n || c.sendDone < n || !headerOk_ || right_->sendsDone() <= headerSendMsg) {
    bool moved = postSends(s, c, op, send, recv);
    moved |= postRecvs(s, c, op, recv);
    moved |= progressLinks(op);
    if (!headerOk_ && left_->recvsDone() > headerRecvMsg_) {
      checkHeader(op);
      moved = true;
    }
    moved |= completeRecvs(s, c, op, send, recv);
    while (c.sendDone < c.sendPosted && right_->sendsDone() >= sendMsgAfter_[c.sendDone % kRing]) {
      ++c.sendDone;
      moved = true;
    }
    assert(c.recvPosted >= c.recvDone && c.sendPosted >= c.sendDone);
    if (moved) {
      deadline = Clock::now() + std::chrono::milliseconds(timeoutMs_);
    } else if (Clock::now() >= deadline) {
      timeout(s, c, op);
    } else {
      wait(deadline);
    }
  }
}

bool ProgressEngine::postSends(const RingSchedule& s, Counters& c, const OpDesc& op,
                               const void* send, void* recv) {
  const size_t es = dtypeSize(op.dtype);
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

bool ProgressEngine::postRecvs(const RingSchedule& s, Counters& c, const OpDesc& op, void* recv) {
  const size_t es = dtypeSize(op.dtype);
  const size_t depth = static_cast<size_t>(s.depth());
  bool moved = false;
  while (headerOk_ && c.recvPosted < s.numUnits() && c.recvPosted < c.recvDone + kInSlots) {
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

bool ProgressEngine::completeRecvs(const RingSchedule& s, Counters& c, const OpDesc& op,
                                   const void* send, void* recv) {
  const size_t es = dtypeSize(op.dtype);
  bool moved = false;
  while (c.recvDone < c.recvPosted && left_->recvsDone() >= recvMsgAfter_[c.recvDone % kRing]) {
    const Unit u = s.unit(c.recvDone);
    if (u.recvInto != Buffer::kNone && u.reduce) {
      uint8_t* dst = u.recvInto == Buffer::kStage ? outSlot(u.recvOffset)
                                                  : static_cast<uint8_t*>(recv) + u.recvOffset * es;
      const uint8_t* mine = static_cast<const uint8_t*>(send) + u.reduceOffset * es;
      reduce_(dst, mine, inSlot(c.recvDone), u.recvCount, op.dtype, op.op);
      if (u.lastReduce && op.op == RR_AVG) finalizeAvg(dst, u.recvCount, op.dtype, size_);
    }
    ++c.recvDone;
    moved = true;
  }
  return moved;
}

bool ProgressEngine::progressLinks(const OpDesc& op) {
  bool moved = false;
  for (Link* link : {right_, left_}) {
    try {
      moved |= link->progress();
    } catch (const Error& e) {
      if (e.origin() < 0 || e.seq() <= op.seq || pendingAbort_) throw;
      pendingAbort_ = e;
      moved = true;
    }
  }
  return moved;
}

void ProgressEngine::checkHeader(const OpDesc& op) {
  headerOk_ = true;
  if (std::memcmp(myHeader_, leftHeader_, sizeof myHeader_) == 0) return;
  const uint8_t* p = leftHeader_;
  const int left = (rank_ - 1 + size_) % size_;
  const rr_result_t code = RR_ERR_MISMATCH;
  fail(code, "ranks disagree on a collective: rank {} called {}, rank {} called {}", left,
       describeOp(wire::get64(p), wire::get32(p + 8), wire::get32(p + 12), wire::get32(p + 16),
                  static_cast<int32_t>(wire::get32(p + 20)), wire::get64(p + 24)),
       rank_,
       describeOp(op.seq, static_cast<uint32_t>(op.kind), op.dtype, op.op, op.root, op.count));
}

void ProgressEngine::wait(Clock::time_point deadline) {
  epoll_event events[16];
  const int ms = std::min(msUntil(deadline) + 1, 1000);
  int n = ::epoll_wait(epollFd_, events, 16, ms);
  if (n < 0 && errno != EINTR) failErrno(errno, "epoll_wait");
  for (int i = 0; i < n; ++i) static_cast<EventTarget*>(events[i].data.ptr)->onEvent(events[i].events);
}

void ProgressEngine::timeout(const RingSchedule& s, const Counters& c, const OpDesc& op) {
  if (pendingAbort_) throw *pendingAbort_;
  const int left = (rank_ - 1 + size_) % size_;
  const int right = (rank_ + 1) % size_;
  const std::string what =
      describeOp(op.seq, static_cast<uint32_t>(op.kind), op.dtype, op.op, op.root, op.count);
  if (!headerOk_ || c.recvDone < s.numUnits())
    fail(RR_ERR_TIMEOUT,
         "{}: no progress for {} ms on rank {}: waiting for data from rank {} (left neighbour); "
         "{} of {} segments received",
         what, timeoutMs_, rank_, left, c.recvDone, s.numUnits());
  fail(RR_ERR_TIMEOUT,
       "{}: no progress for {} ms on rank {}: waiting for rank {} (right neighbour) to take data; "
       "{} of {} segments sent",
       what, timeoutMs_, rank_, right, c.sendDone, s.numUnits());
}

}  // namespace rr
