// ProgressEngine; see progress_engine.h, and pass.h for the counters and their rules.
#include "engine/run/progress_engine.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <thread>

#include "engine/run/device_pass.h"
#include "engine/run/host_pass.h"
#include "engine/run/spin.h"
#include "kernels/dtype.h"

namespace rr {

ProgressEngine::ProgressEngine(int rank, int size, Link* left, Link* right,
                               std::vector<PartnerLink> partners, EventSet& events, size_t segmentBytes,
                               int timeoutMs, std::chrono::microseconds spin, std::function<void()> onIdle,
                               const std::atomic<bool>* aborted)
    : rank_(rank),
      size_(size),
      left_(left),
      right_(right),
      partners_(std::move(partners)),
      partnerInbox_(partners_.size()),
      events_(events),
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
  leftInbox_.link = left_;
  leftInbox_.rank = leftRank();
  for (size_t i = 0; i < partners_.size(); ++i) {
    partnerInbox_[i].link = partners_[i].link;
    partnerInbox_[i].rank = partners_[i].rank;
  }
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
  devStaging_ = static_cast<uint8_t*>(device->allocStaging((2 * PassShape::kInSlots + PassShape::kOutSlots) * segmentBytes_));
  device_ = device;
}

void ProgressEngine::checkAborted() const {
  if (aborted_ != nullptr && aborted_->load(std::memory_order_relaxed))
    fail(RR_ERR_ABORTED, "rank {}: rr_comm_abort was called", rank_);
}

Clock::time_point ProgressEngine::deadline() const {
  return Clock::now() + std::chrono::milliseconds(timeoutMs_);
}

uint64_t ProgressEngine::postHeader(const GroupHeader& header, Link& link) {
  const GroupHeader h = onTheWire(header);
  h.encode(sentHeader_);
  link.postSend(sentHeader_, GroupHeader::kFixedBytes, FrameType::kOpHeader);
  if (h.numOps > 1) link.postSend(sentHeader_ + GroupHeader::kFixedBytes, h.restBytes(), FrameType::kOpHeader);
  return link.sendsPosted();
}

void ProgressEngine::HeaderInbox::arm() {
  if (posted) return;
  posted = true;
  msg = link->recvsPosted();
  rest = false;
  link->postRecv(bytes, GroupHeader::kFixedBytes, FrameType::kOpHeader);
}

bool ProgressEngine::HeaderInbox::arrived() {
  if (!posted || link->recvsDone() <= msg) return false;
  if (rest) return true;
  const uint32_t ops = GroupHeader::opsIn(bytes, rank);
  if (ops == 1) return true;
  rest = true;  // the counts of a fused pass follow in a frame of their own
  msg = link->recvsPosted();
  link->postRecv(bytes + GroupHeader::kFixedBytes, 8 * (ops - 1), FrameType::kOpHeader);
  return false;
}

bool ProgressEngine::checkPartnerHeaders(const GroupHeader& mine) {
  bool moved = false;
  for (size_t i = 0; i < partners_.size(); ++i) {
    if (partners_[i].headerChecked || !partnerInbox_[i].arrived()) continue;
    checkPeerHeader(partners_[i].rank, partnerInbox_[i].take(), mine);
    partners_[i].headerChecked = true;
    moved = true;
  }
  return moved;
}

void ProgressEngine::checkStrayPartnerHeaders(const GroupHeader& mine) {
  for (size_t i = 0; i < partners_.size(); ++i) {
    if (!partnerInbox_[i].arrived()) continue;
    const GroupHeader theirs = partnerInbox_[i].peek();
    if (theirs.firstSeq > mine.firstSeq) continue;  // the partner's next collective: its pass checks it
    checkPeerHeader(partners_[i].rank, theirs, mine);
    fail(RR_ERR_SYSTEM,
         "protocol error: rank {} sent its partner rank {} (recursive doubling, halving-doubling) a header of {}, which "
         "runs on the ring",
         partners_[i].rank, rank_, describeOp(mine.opAt(0)));
  }
}

std::optional<GroupHeader> ProgressEngine::leftHeaderIfArrived() {
  for (;;) {
    leftInbox_.arm();
    if (!leftInbox_.arrived()) return std::nullopt;
    const GroupHeader h = leftInbox_.take();
    if (!staleProposal(h)) return h;
  }
}

bool ProgressEngine::partnersDone() const {
  for (size_t i = 0; i < partners_.size(); ++i)
    if (!partners_[i].headerChecked || partners_[i].headerSent == 0 ||
        partners_[i].link->sendsDone() < partners_[i].headerSent)
      return false;
  return true;
}

int ProgressEngine::awaitedPartner(const Schedule& s, const PassCounters& c) const {
  for (const PartnerLink& p : partners_)
    if (!p.headerChecked) return p.rank;
  if (c.recvDone < s.numUnits()) return s.unit(c.recvDone).peer;
  if (c.sendDone < s.numUnits()) return s.unit(c.sendDone).peer;
  return -1;
}

ProgressEngine::Heard ProgressEngine::receiveHeader(const OpDesc& next) {
  if (pendingAbort_) throw *pendingAbort_;
  using_ = Using::kAll;
  armPartners();
  const Clock::time_point start = Clock::now();
  Clock::time_point until = deadline();
  for (;;) {
    // A partner's pass header is the decision; it stays in the inbox for the pass to check.
    for (size_t i = 0; i < partners_.size(); ++i)
      if (partnerInbox_[i].arrived()) {
        stalledOn(0, WaitingOn::kNothing, {});
        return Heard{partnerInbox_[i].peek(), partners_[i].rank, false};
      }
    if (std::optional<GroupHeader> left = leftHeaderIfArrived()) {
      stalledOn(0, WaitingOn::kNothing, {});
      return Heard{*left, leftRank(), true};
    }
    if (progressLinks(next.seq)) continue;
    stalledOn(next.seq, WaitingOn::kLeft, start);
    if (Clock::now() >= until)
      timeout(describeOp(next) + (partners_.empty() ? ": waiting for the left neighbour to start it"
                                                     : ": waiting for the left neighbour or a recursive "
                                                       "doubling or halving-doubling partner to start it"),
              true, 0, 1);
    wait(until, start);
  }
}

void ProgressEngine::pollIdle() {
  events_.dispatch(0);
  try {
    forEachLink([](Link* link) { link->progress(); });
  } catch (const Error& e) {
    // A header receive stays posted between collectives (see above); a peer that closed
    // its end (it may have destroyed its communicator) is the next collective's to report.
    if (e.origin() >= 0 || e.code() != RR_ERR_PEER_LOST) throw;
    return;
  }
  // A proposal that a rank running alone left on the ring link: dropped, so that what
  // comes behind it (an abort frame) is read.
  if (leftInbox_.posted && leftInbox_.arrived()) {
    if (staleProposal(leftInbox_.peek())) {
      leftInbox_.take();
      leftInbox_.arm();
    }
  }
}

void ProgressEngine::sendHeader(const GroupHeader& header) {
  const uint64_t sent = postHeader(header, *right_);
  const Clock::time_point start = Clock::now();
  Clock::time_point until = deadline();
  while (right_->sendsDone() < sent) {
    if (progressLinks(header.firstSeq)) continue;
    stalledOn(header.firstSeq, WaitingOn::kRight, start);
    if (Clock::now() >= until)
      timeout(describeOp(header.opAt(0)) + ": sending the fusion proposal", false, 0, 1);
    wait(until, start);
  }
  stalledOn(0, WaitingOn::kNothing, {});
}

bool ProgressEngine::uses(const Link* link) const {
  if (using_ == Using::kAll) return true;
  const bool ring = link == left_ || link == right_;
  return using_ == Using::kRing ? ring : !ring;
}

PassTimes ProgressEngine::run(const Schedule& s, const GroupHeader& h, const GroupHeader* leftHeader,
                              const void* send, void* recv, Device* device, uint32_t deviceBase) {
  if (pendingAbort_) throw *pendingAbort_;
  if (device != nullptr && device != device_)
    fail(RR_ERR_INTERNAL, "rank {}: a device pass before the device was attached", rank_);
  // Recursive doubling at n > 2: every partner gets this rank's header on its link, and its
  // data is received only once its header has been checked (PartnerLink::headerChecked);
  // nothing moves on the ring's links.
  const bool partners = s.usesPartners();
  const std::span<PartnerLink> partnerLinks =
      partners ? std::span<PartnerLink>(partners_) : std::span<PartnerLink>();
  // On the ring this rank's header goes first on the right link, the data right behind it:
  // nothing waits for a header to go around the ring. The left neighbour's header is
  // checked before any of its data is received (a frame of another collective must never
  // land in this one's buffers).
  using_ = partners ? Using::kPartners : partners_.empty() ? Using::kAll : Using::kRing;
  uint64_t headerSent = 0;
  const GroupHeader sent = onTheWire(h);
  if (partners)
    sent.encode(sentHeader_);  // what the partners' headers are sent from
  else
    headerSent = postHeader(h, *right_);
  const PassArgs args{s,
                      *left_,
                      *right_,
                      partnerLinks,
                      sentHeader_,
                      GroupHeader::kFixedBytes,
                      sent.numOps > 1 ? sent.restBytes() : 0,
                      h.dtype,
                      h.op,
                      size_,
                      send,
                      recv,
                      device != nullptr ? devStaging_ : staging_,
                      segmentBytes_};
  // On the stack: a pass allocates nothing.
  std::optional<DevicePass> devicePass;
  std::optional<HostPass> hostPass;
  Pass* pass = device != nullptr ? static_cast<Pass*>(&devicePass.emplace(args, *device, deviceBase))
                                 : &hostPass.emplace(args, reduce_, scale_);
  PassTimes times;
  times.start = times.peers = times.reduced = Clock::now();
  // The partners' headers: this rank's goes ahead of its first data for each (the pass
  // posts it), theirs are received here and checked in the loop.
  for (size_t i = 0; i < partnerLinks.size(); ++i) {
    partners_[i].headerChecked = false;
    partners_[i].headerSent = 0;  // goes ahead of the first data for the partner
  }
  armPartners();  // on the ring too: a partner's header for this collective is a mismatch
  bool headerOk = leftHeader != nullptr || partners;
  if (leftHeader != nullptr) checkLeftHeader(*leftHeader, h);

  const size_t n = s.numUnits();
  const size_t reduceEnd = s.reduceEnd();
  PassCounters c;
  Clock::time_point lastMoved = Clock::now();
  Clock::time_point until = deadline();
  while (c.recvDone < n || c.sendDone < n || !headerOk || right_->sendsDone() < headerSent ||
         (partners && !partnersDone())) {
    checkAborted();
    bool moved = pass->postSends(c);
    if (partners) {
      moved |= checkPartnerHeaders(h);
      // A partner this rank is about to wait for has its header first (it may be waiting
      // for a decision: the fold's receiving rank takes data before it sends any), and one
      // this pass sends nothing (a count of 0) still gets it.
      if (c.recvDone < n) pass->postHeaderBeforeWaiting(s.unit(c.recvDone));
      if (c.sendPosted == n)
        for (PartnerLink& p : partnerLinks) pass->postPartnerHeader(p);
    } else if (!partners_.empty()) {
      checkStrayPartnerHeaders(h);
    }
    if (headerOk || partners) moved |= pass->postRecvs(c);  // a partner's data: after its header
    if (testPauseMs_ > 0 && c.sendPosted == n && c.sendDone < n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(testPauseMs_));  // a slow rank
      testPauseMs_ = 0;
    }
    moved |= progressLinks(h.firstSeq);
    if (const std::optional<GroupHeader> left = headerOk ? std::nullopt : leftHeaderIfArrived()) {
      moved = true;
      if (left->proposal) {
        // Rank 0 proposed fusion while this rank had one collective queued and started it
        // alone: the pass carries that one (the proposal, cut here, could not have come
        // back larger), so the proposal ends here and the decision follows it. (The next
        // read of the left link, in this loop, posts its receive again.)
        const bool absorbed = rank_ != 0 && h.numOps == 1 && sameOp(left->opAt(0), h.opAt(0));
        if (!absorbed) checkLeftHeader(*left, h);  // a proposal of something else: named
      } else {
        checkLeftHeader(*left, h);
        headerOk = true;
        times.peers = Clock::now();
      }
    }
    const size_t before = c.recvDone;
    moved |= pass->completeRecvs(c);
    if (before < reduceEnd && c.recvDone >= reduceEnd) times.reduced = Clock::now();
    moved |= pass->completeSends(c);
    assert(c.recvPosted >= c.recvDone && c.sendPosted >= c.sendDone);
    if (moved) {
      lastMoved = Clock::now();
      until = lastMoved + std::chrono::milliseconds(timeoutMs_);
      stall_.on = WaitingOn::kNothing;
      continue;
    }
    const bool devicePending = pass->devicePending(c);
    const bool receiving = !headerOk || c.recvDone < n;
    // The rank this one waits for: a partner (recursive doubling, halving-doubling), else the
    // left neighbour for data, the right one to take it (the stall monitor follows it).
    const int awaited = devicePending ? -1 : partners ? awaitedPartner(s, c) : receiving ? leftRank() : (rank_ + 1) % size_;
    stalledOn(h.firstSeq, devicePending ? WaitingOn::kDevice : receiving ? WaitingOn::kLeft : WaitingOn::kRight,
              lastMoved, awaited);
    if (Clock::now() >= until) {
      const std::string what =
          describeOp(h.opAt(0)) + (h.numOps > 1 ? fmt::format(" (fused with {} more)", h.numOps - 1) : "");
      if (const std::string stalled = pass->stalledOnDevice(c); !stalled.empty()) {
        if (pendingAbort_) throw *pendingAbort_;
        fail(RR_ERR_TIMEOUT, "{}: no progress for {} ms on rank {}: {}", what, timeoutMs_, rank_, stalled);
      }
      const bool left = !headerOk || c.recvDone < n;
      const int partner = headerOk && partners ? awaitedPartner(s, c) : -1;
      timeout(what, partner >= 0 ? c.recvDone < n : left, left ? c.recvDone : c.sendDone, n, partner, s.algo());
    }
    // Device work has no fd to wake the wait: poll instead of sleeping while it runs.
    wait(until, lastMoved, devicePending);
  }
  stalledOn(0, WaitingOn::kNothing, {});
  using_ = Using::kAll;
  doneSeq_ = h.firstSeq + h.numOps - 1;
  // Between collectives the partners' header receives stay posted (their next header may
  // come before this rank's next pass), and after recursive doubling the left's too: a
  // proposal left there is dropped while idle, not left in front of an abort frame.
  armPartners();
  if (partners) leftInbox_.arm();
  times.end = Clock::now();
  if (reduceEnd == 0) times.reduced = times.peers;
  return times;
}

void ProgressEngine::checkPeerHeader(int peer, const GroupHeader& left, const GroupHeader& mine) const {
  if (left.proposal)
    fail(RR_ERR_MISMATCH, "ranks disagree on a collective: rank {} proposed fusing from {}, rank {} called {}",
         peer, describeOp(left.opAt(0)), rank_, describeOp(mine.opAt(0)));
  for (size_t i = 0; i < std::min(left.numOps, mine.numOps); ++i)
    if (!sameOp(left.opAt(i), mine.opAt(i)))
      fail(RR_ERR_MISMATCH, "{}", mismatchText(peer, left.opAt(i), rank_, mine.opAt(i)));
  if (left.numOps != mine.numOps)
    fail(RR_ERR_MISMATCH, "ranks disagree on a collective: rank {} runs {} collectives in one pass from {}, rank {} runs {}",
         peer, left.numOps, describeOp(left.opAt(0)), rank_, mine.numOps);
  // The same collectives and the same job-wide settings (agreed at init): only a bucket in
  // GPU memory against one in host memory makes two ranks run a pass differently.
  const auto memory = [](bool device) { return device ? "GPU memory" : "host memory"; };
  const auto algoName = [this](const GroupHeader& h) {
    if (h.algo == Algorithm::kRd && size_ == 2)
      return h.pairLink ? "recursive doubling on the pair's own link" : "recursive doubling on the ring's links";
    return h.algo == Algorithm::kRd ? "recursive doubling" : h.algo == Algorithm::kHd ? "halving-doubling" : "the ring";
  };
  if (left.algo != mine.algo || left.pairLink != mine.pairLink) {
    const std::string what = describeOp(mine.opAt(0)) +
                             (mine.numOps > 1 ? fmt::format(" (fused with {} more)", mine.numOps - 1) : "");
    if (left.device != mine.device)
      fail(RR_ERR_MISMATCH,
           "ranks disagree on how to run {}: rank {} has its bucket in {} and runs {}, rank {} has it in {} and "
           "runs {} (every rank's bucket must be in the same kind of memory)",
           what, peer, memory(left.device), algoName(left), rank_, memory(mine.device), algoName(mine));
    fail(RR_ERR_MISMATCH,
         "ranks disagree on the algorithm of {}: rank {} runs {}, rank {} runs {} (RR_ALGO and the build must be "
         "the same on every rank)",
         what, peer, algoName(left), rank_, algoName(mine));
  }
}

void ProgressEngine::idleDuties() {
  if (onIdle_ && Clock::now() - lastIdle_ >= std::chrono::milliseconds(100)) {
    lastIdle_ = Clock::now();
    onIdle_();
  }
}

bool ProgressEngine::progressLinks(uint64_t seq) {
  // On a pass that keeps moving too: rank 0 then reads the others' reports as they come,
  // so a rank's silence counts from its last report, not from when rank 0 last waited.
  idleDuties();
  if (!polled_) {
    bool stale = false;
    forEachLink([&](Link* link) { stale = stale || (uses(link) && link->waitsForEvent()); });
    if (stale) events_.dispatch(0);
  }
  polled_ = false;
  bool moved = false;
  forEachLink([&](Link* link) {
    try {
      moved |= link->progress();
    } catch (const Error& e) {
      // A link this pass does not use holds only a header receive posted for later (see
      // progress_engine.h): its peer may have finished and gone. The next pass that uses
      // the link reports the loss (it is seen again there).
      if (e.origin() < 0 && e.code() == RR_ERR_PEER_LOST && !uses(link)) return;
      if (e.origin() < 0 && e.code() == RR_ERR_PEER_LOST) preferAbort(link, e, seq);
      if (e.origin() < 0 || e.seq() <= seq) throw;
      // A later collective's (both neighbours may send one): the first is kept for the next
      // call; this one still completes with the data its neighbours sent before they moved
      // on. Not progress: the deadline of this pass still runs from its last real progress.
      if (!pendingAbort_) pendingAbort_ = e;
    }
  });
  return moved;
}

void ProgressEngine::preferAbort(Link* lost, const Error& loss, uint64_t seq) {
  // A neighbour that failed first tells both of its neighbours why, then goes away; its
  // close can reach this rank before its reason (or take the reason with it, when the
  // close resets the connection). The other neighbour's abort frame, already here or
  // within a short grace, names the first failure: report that, as every rank then does
  // (an abort from a later collective is kept for the next call, as progressLinks keeps it).
  if (pendingAbort_) throw *pendingAbort_;
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(std::clamp(timeoutMs_ / 10, 1, 50));
  for (;;) {
    bool later = false;
    forEachLink([&](Link* link) {
      if (link == lost || later) return;
      try {
        link->progress();
      } catch (const Error& e) {
        if (e.origin() < 0 && !uses(link)) return;  // not this pass's link (progressLinks)
        if (e.origin() < 0) throw loss;  // that one is gone too: this rank's own view is all there is
        if (e.seq() <= seq) throw;
        pendingAbort_ = e;  // a later collective's: it fails the next call, the loss this one
        later = true;
      }
    });
    if (later || Clock::now() >= until) return;
    events_.dispatch(1);
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
  polled_ = true;
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

void ProgressEngine::timeout(const std::string& what, bool waitingForLeft, size_t done,
                             size_t total, int partner, Algorithm algo) {
  if (pendingAbort_) throw *pendingAbort_;
  const char* role = algo == Algorithm::kHd ? "halving-doubling" : "recursive doubling";
  const int left = (rank_ - 1 + size_) % size_;
  const int right = (rank_ + 1) % size_;
  // Rank 0's view of who holds the job up leads the message when it has one. Without one
  // (rank 0 gone or frozen), a neighbour's abort that comes within a short grace carries the
  // first failure, with the cause its rank saw: every rank then reports the same one.
  // Rank 0 may be failing too, and answer only when it is done: the links are watched
  // meanwhile, and a neighbour's abort ends the wait (it carries the first failure).
  const auto watch = [&] {
    try {
      events_.dispatch(0);  // what came on any link, an abort on an idle one too
      polled_ = true;
      progressLinks(stall_.seq);
    } catch (const Error& e) {
      if (e.origin() >= 0) throw;  // a neighbour gone: rank 0's answer is still worth waiting for
    }
    if (pendingAbort_) throw *pendingAbort_;
  };
  const StallCause explained = explain_ ? explain_(stall_, watch) : StallCause{};
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
    if (pendingAbort_) throw *pendingAbort_;
    if (Clock::now() < grace) wait(grace, Clock::time_point{});
  } while (Clock::now() < grace);
  if (!cause.empty()) cause += "; ";
  if (partner >= 0 && waitingForLeft)
    fail(RR_ERR_TIMEOUT,
         "{}: {}no progress for {} ms on rank {}: waiting for data from rank {} ({} partner); {} of {} "
         "segments received",
         what, cause, timeoutMs_, rank_, partner, role, done, total);
  if (partner >= 0)
    fail(RR_ERR_TIMEOUT,
         "{}: {}no progress for {} ms on rank {}: waiting for rank {} ({} partner) to take data; {} of {} "
         "segments sent",
         what, cause, timeoutMs_, rank_, partner, role, done, total);
  if (waitingForLeft)
    fail(RR_ERR_TIMEOUT,
         "{}: {}no progress for {} ms on rank {}: waiting for data from rank {} (left "
         "neighbour); {} of {} segments received",
         what, cause, timeoutMs_, rank_, left, done, total);
  fail(RR_ERR_TIMEOUT,
       "{}: {}no progress for {} ms on rank {}: waiting for rank {} (right neighbour) to take "
       "data; {} of {} segments sent",
       what, cause, timeoutMs_, rank_, right, done, total);
}

}  // namespace rr
