// Agreement; see agreement.h.
#include "engine/run/agreement.h"

#include <algorithm>
#include <chrono>

namespace rr {

void Agreement::Inbox::arm() {
  if (posted) return;
  posted = true;
  msg = link->recvsPosted();
  rest = false;
  link->postRecv(bytes, GroupHeader::kFixedBytes, FrameType::kOpHeader);
}

bool Agreement::Inbox::arrived() {
  if (!posted || link->recvsDone() <= msg) return false;
  if (rest) return true;
  const uint32_t ops = GroupHeader::opsIn(bytes, rank);
  if (ops == 1) return true;
  rest = true;  // the counts of a fused pass follow in a frame of their own
  msg = link->recvsPosted();
  link->postRecv(bytes + GroupHeader::kFixedBytes, 8 * (ops - 1), FrameType::kOpHeader);
  return false;
}

Agreement::Agreement(int rank, int size, Link& left, Link& right, std::vector<Link*> partners, EventSet& events,
                     int timeoutMs)
    : rank_(rank),
      size_(size),
      left_(left),
      right_(right),
      events_(events),
      abortGrace_(std::clamp(timeoutMs / 10, 1, 50)) {
  leftInbox_.link = &left_;
  leftInbox_.rank = leftRank();
  partners_.resize(partners.size());
  for (size_t i = 0; i < partners.size(); ++i) {
    partners_[i].rank = partners[i]->peerRank();
    partners_[i].link = partners[i];
    partners_[i].inbox.link = partners[i];
    partners_[i].inbox.rank = partners[i]->peerRank();
  }
  all_ = {&right_, &left_};
  all_.insert(all_.end(), partners.begin(), partners.end());
}

// ---- Between passes.

std::optional<Heard> Agreement::nextHeader() {
  throwPendingAbort();
  using_ = Using::kAll;
  for (Partner& p : partners_) p.inbox.arm();
  // A partner's pass header is the decision; it stays in the inbox for the pass to check.
  for (Partner& p : partners_)
    if (p.inbox.arrived()) return Heard{p.inbox.peek(), p.rank, false};
  if (std::optional<GroupHeader> left = leftHeaderIfArrived()) return Heard{*left, leftRank(), true};
  return std::nullopt;
}

uint64_t Agreement::postProposal(const GroupHeader& header) { return postHeader(header, right_); }

void Agreement::idle() {
  events_.dispatch(0);
  try {
    for (Link* link : links()) link->progress();
  } catch (const Error& e) {
    // A header receive stays posted between collectives; a peer that closed its end (it
    // may have destroyed its communicator) is the next collective's to report.
    if (e.origin() >= 0 || e.code() != RR_ERR_PEER_LOST) throw;
    return;
  }
  // A proposal that a rank running alone left on the ring link: dropped, so that what
  // comes behind it (an abort frame) is read.
  if (leftInbox_.posted && leftInbox_.arrived() && staleProposal(leftInbox_.peek())) {
    leftInbox_.take();
    leftInbox_.arm();
  }
}

std::optional<GroupHeader> Agreement::leftHeaderIfArrived() {
  for (;;) {
    leftInbox_.arm();
    if (!leftInbox_.arrived()) return std::nullopt;
    const GroupHeader h = leftInbox_.take();
    if (!staleProposal(h)) return h;
  }
}

uint64_t Agreement::postHeader(const GroupHeader& header, Link& link) {
  const GroupHeader& h = onTheWire(header, lie_);
  h.encode(sentHeader_);
  link.postSend(sentHeader_, GroupHeader::kFixedBytes, FrameType::kOpHeader);
  if (h.numOps > 1) link.postSend(sentHeader_ + GroupHeader::kFixedBytes, h.restBytes(), FrameType::kOpHeader);
  return link.sendsPosted();
}

// ---- During a pass.

void Agreement::open(const GroupHeader& mine, bool partners, const GroupHeader* leftHeader) {
  throwPendingAbort();
  mine_ = mine;
  using_ = partners ? Using::kPartners : partners_.empty() ? Using::kAll : Using::kRing;
  // On the ring this rank's header goes first on the right link, its data right behind
  // it: nothing waits for a header to go around the ring.
  rightSent_ = 0;
  const GroupHeader& wire = onTheWire(mine, lie_);
  if (partners)
    wire.encode(sentHeader_);  // what the partners' headers are sent from
  else
    rightSent_ = postHeader(mine, right_);
  sentRestBytes_ = wire.numOps > 1 ? wire.restBytes() : 0;
  // The partners' headers: this rank's goes ahead of its first data for each; theirs are
  // checked in poll, on the ring too (a partner's header for this collective is a mismatch).
  for (Partner& p : partners_) {
    p.checked = false;
    p.sent = 0;
    p.inbox.arm();
  }
  leftOk_ = leftHeader != nullptr || partners;
  if (leftHeader != nullptr) checkLeft(*leftHeader);
}

bool Agreement::pollPartners(const Schedule& s, const PassCounters& c) {
  if (using_ != Using::kPartners) {
    if (!partners_.empty()) checkStrayPartnerHeaders();
    return false;
  }
  const bool moved = checkPartnerHeaders();
  // A partner this rank is about to wait for has its header first (it may be waiting for a
  // decision: the fold's receiving rank takes data before it sends any), and one this pass
  // sends nothing (a count of 0) still gets it.
  if (c.recvDone < s.numUnits()) {
    const Unit u = s.unit(c.recvDone);
    if (u.peer >= 0 && u.recvInto != Buffer::kNone) postToPartner(partner(u.peer));
  }
  if (c.sendPosted == s.numUnits())
    for (Partner& p : partners_) postToPartner(p);
  return moved;
}

bool Agreement::pollLeft() {
  if (leftOk_) return false;
  const std::optional<GroupHeader> left = leftHeaderIfArrived();
  if (!left) return false;
  if (left->proposal) {
    // Rank 0 proposed fusion while this rank had one collective queued and started it
    // alone: the pass carries that one (the proposal, cut here, could not have come back
    // larger), so the proposal ends here and the decision follows it. (The next read of
    // the left link posts its receive again.)
    const bool absorbed = rank_ != 0 && mine_.numOps == 1 && sameOp(left->opAt(0), mine_.opAt(0));
    if (!absorbed) checkLeft(*left);  // a proposal of something else: named
    return true;
  }
  checkLeft(*left);
  leftOk_ = true;
  return true;
}

Link& Agreement::sendLink(const Unit& u) {
  if (u.peer < 0) return right_;
  Partner& p = partner(u.peer);
  postToPartner(p);
  return *p.link;
}

Link* Agreement::recvLink(const Unit& u) {
  if (u.peer < 0) return leftOk_ ? &left_ : nullptr;
  Partner& p = partner(u.peer);
  return p.checked ? p.link : nullptr;
}

bool Agreement::settled() const {
  if (!leftOk_ || right_.sendsDone() < rightSent_) return false;
  if (using_ != Using::kPartners) return true;
  for (const Partner& p : partners_)
    if (!p.checked || p.sent == 0 || p.link->sendsDone() < p.sent) return false;
  return true;
}

int Agreement::awaited(const Schedule& s, const PassCounters& c) const {
  if (using_ != Using::kPartners) return !leftOk_ || c.recvDone < s.numUnits() ? leftRank() : rightRank();
  for (const Partner& p : partners_)
    if (!p.checked) return p.rank;
  if (c.recvDone < s.numUnits()) return s.unit(c.recvDone).peer;
  if (c.sendDone < s.numUnits()) return s.unit(c.sendDone).peer;
  return -1;
}

void Agreement::close(uint64_t lastSeq) {
  const bool partners = using_ == Using::kPartners;
  using_ = Using::kAll;
  doneSeq_ = lastSeq;
  // Between collectives the partners' header receives stay posted (their next header may
  // come before this rank's next pass), and after recursive doubling the left's too: a
  // proposal left there is dropped while idle, not left in front of an abort frame.
  for (Partner& p : partners_) p.inbox.arm();
  if (partners) leftInbox_.arm();
}

Agreement::Partner& Agreement::partner(int rank) {
  for (Partner& p : partners_)
    if (p.rank == rank) return p;
  fail(RR_ERR_INTERNAL, "a unit names rank {}, which is not a partner of rank {}", rank, rank_);
}

void Agreement::postToPartner(Partner& p) {
  if (p.sent != 0) return;
  p.link->postSend(sentHeader_, GroupHeader::kFixedBytes, FrameType::kOpHeader);
  if (sentRestBytes_ > 0) p.link->postSend(sentHeader_ + GroupHeader::kFixedBytes, sentRestBytes_, FrameType::kOpHeader);
  p.sent = p.link->sendsPosted();
}

bool Agreement::checkPartnerHeaders() {
  bool moved = false;
  for (Partner& p : partners_) {
    if (p.checked || !p.inbox.arrived()) continue;
    checkPeerHeader(p.rank, p.inbox.take());
    p.checked = true;
    moved = true;
  }
  return moved;
}

void Agreement::checkStrayPartnerHeaders() {
  for (Partner& p : partners_) {
    if (!p.inbox.arrived()) continue;
    const GroupHeader theirs = p.inbox.peek();
    if (theirs.firstSeq > mine_.firstSeq) continue;  // the partner's next collective: its pass checks it
    checkPeerHeader(p.rank, theirs);
    fail(RR_ERR_SYSTEM,
         "protocol error: rank {} sent its partner rank {} (recursive doubling, halving-doubling) a header of {}, which "
         "runs on the ring",
         p.rank, rank_, describeOp(mine_.opAt(0)));
  }
}

void Agreement::checkLeft(const GroupHeader& left) { checkPeerHeader(leftRank(), left); }

void Agreement::checkPeerHeader(int peer, const GroupHeader& theirs) const {
  const GroupHeader& mine = mine_;
  if (theirs.proposal)
    fail(RR_ERR_MISMATCH, "ranks disagree on a collective: rank {} proposed fusing from {}, rank {} called {}",
         peer, describeOp(theirs.opAt(0)), rank_, describeOp(mine.opAt(0)));
  for (size_t i = 0; i < std::min(theirs.numOps, mine.numOps); ++i)
    if (!sameOp(theirs.opAt(i), mine.opAt(i)))
      fail(RR_ERR_MISMATCH, "{}", mismatchText(peer, theirs.opAt(i), rank_, mine.opAt(i)));
  if (theirs.numOps != mine.numOps)
    fail(RR_ERR_MISMATCH,
         "ranks disagree on a collective: rank {} runs {} collectives in one pass from {}, rank {} runs {}", peer,
         theirs.numOps, describeOp(theirs.opAt(0)), rank_, mine.numOps);
  // The same collectives and the same job-wide settings (agreed at init): only a bucket in
  // GPU memory against one in host memory makes two ranks run a pass differently.
  if (theirs.algo == mine.algo && theirs.pairLink == mine.pairLink) return;
  const auto memory = [](bool device) { return device ? "GPU memory" : "host memory"; };
  const auto algoName = [this](const GroupHeader& h) {
    if (h.algo == Algorithm::kRd && size_ == 2)
      return h.pairLink ? "recursive doubling on the pair's own link" : "recursive doubling on the ring's links";
    return h.algo == Algorithm::kRd ? "recursive doubling" : h.algo == Algorithm::kHd ? "halving-doubling" : "the ring";
  };
  const std::string what =
      describeOp(mine.opAt(0)) + (mine.numOps > 1 ? fmt::format(" (fused with {} more)", mine.numOps - 1) : "");
  if (theirs.device != mine.device)
    fail(RR_ERR_MISMATCH,
         "ranks disagree on how to run {}: rank {} has its bucket in {} and runs {}, rank {} has it in {} and "
         "runs {} (every rank's bucket must be in the same kind of memory)",
         what, peer, memory(theirs.device), algoName(theirs), rank_, memory(mine.device), algoName(mine));
  fail(RR_ERR_MISMATCH,
       "ranks disagree on the algorithm of {}: rank {} runs {}, rank {} runs {} (RR_ALGO and the build must be "
       "the same on every rank)",
       what, peer, algoName(theirs), rank_, algoName(mine));
}

// ---- The links.

bool Agreement::uses(const Link* link) const {
  if (using_ == Using::kAll) return true;
  const bool ring = link == &left_ || link == &right_;
  return using_ == Using::kRing ? ring : !ring;
}

bool Agreement::progressLinks(uint64_t seq) {
  if (!polled_) {
    bool stale = false;
    for (Link* link : links()) stale = stale || (uses(link) && link->waitsForEvent());
    if (stale) events_.dispatch(0);
  }
  polled_ = false;
  bool moved = false;
  for (Link* link : links()) {
    try {
      moved |= link->progress();
    } catch (const Error& e) {
      // A link this pass does not use holds only a header receive posted for later: its
      // peer may have finished and gone. The next pass that uses the link reports the
      // loss (it is seen again there).
      if (e.origin() < 0 && e.code() == RR_ERR_PEER_LOST && !uses(link)) continue;
      if (e.origin() < 0 && e.code() == RR_ERR_PEER_LOST) preferAbort(link, e, seq);
      if (e.origin() < 0 || e.seq() <= seq) throw;
      // A later collective's (both neighbours may send one): the first is kept for the next
      // call; this one still completes with the data its neighbours sent before they moved
      // on. Not progress: the deadline of this pass still runs from its last real progress.
      if (!pendingAbort_) pendingAbort_ = e;
    }
  }
  return moved;
}

void Agreement::preferAbort(Link* lost, const Error& loss, uint64_t seq) {
  // The other link's abort frame, already here or within a short grace, names the first
  // failure: report that, as every rank then does (an abort from a later collective is kept
  // for the next call, as progressLinks keeps it).
  throwPendingAbort();
  const auto until = Clock::now() + abortGrace_;
  for (;;) {
    bool later = false;
    for (Link* link : links()) {
      if (link == lost || later) continue;
      try {
        link->progress();
      } catch (const Error& e) {
        if (e.origin() < 0 && !uses(link)) continue;  // not this pass's link (progressLinks)
        if (e.origin() < 0) throw loss;  // that one is gone too: this rank's own view is all there is
        if (e.seq() <= seq) throw;
        pendingAbort_ = e;  // a later collective's: it fails the next call, the loss this one
        later = true;
      }
    }
    if (later || Clock::now() >= until) return;
    events_.dispatch(1);
  }
}

void Agreement::watch(uint64_t seq) {
  try {
    events_.dispatch(0);  // what came on any link, an abort on an idle one too
    polled_ = true;
    progressLinks(seq);
  } catch (const Error& e) {
    if (e.origin() >= 0) throw;  // a neighbour gone: rank 0's answer is still worth waiting for
  }
  throwPendingAbort();
}

}  // namespace rr
