// Agreement: the exchange that guards every pass (docs/design.md, "The pass agreement").
// Before a rank takes a single byte of a peer's data for a collective, it has checked that
// peer's op header against its own: ranks that called different collectives fail with
// RR_ERR_MISMATCH naming both ranks and both calls, and a frame of another collective never
// lands in this one's buffers. The agreement owns every link's header traffic and reads
// every link for aborts; the pass (pass.h) moves data only through its gates.
//
//   between passes   the next header: the left neighbour's (a fusion proposal or a pass
//                    header) or a recursive doubling partner's pass header; proposals of
//                    a collective this rank has completed are dropped (stale); the fusion
//                    protocol runs on these (fusion_agreement.h)
//   a pass opens     with this rank's header: posted on the right link, the data right
//                    behind it (the ring), or, with partners (recursive doubling and
//                    halving-doubling at n > 2, the pair's own link at n = 2), sent to each
//                    partner ahead of the first data for it, or before this rank waits for
//                    the partner's data (poll), so that a partner waiting for a decision
//                    hears it
//   during it        poll() checks what arrived: the left's header (a proposal that met a
//                    rank running one collective alone is absorbed: the pass is the
//                    decision), each partner's header before any of its data, and on the
//                    ring a partner's header of this collective or an earlier one (it runs
//                    recursive doubling: named); sendLink/recvLink are the pass's gates
//   after it         close(): the partners' header receives (and, after recursive doubling,
//                    the left's) stay posted for the next collective's header
//
// Aborts: a neighbour's or partner's abort frame fails the running pass, unless it comes
// from a later collective (the peer finished this one and failed the next): that one is kept
// for the next call, and this pass completes with the data already sent. A lost connection
// is reported only after the other links' abort frames had a short grace: a neighbour that
// failed first tells both of its neighbours why, then goes away, and its close can reach
// this rank before its reason.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/error.h"
#include "engine/plan/schedule.h"
#include "engine/run/op_header.h"
#include "transport/event_set.h"
#include "transport/link.h"

namespace rr {

// The counters of a pass's pipeline (pass.h has their rules).
struct PassCounters {
  size_t recvPosted = 0, recvDone = 0, sendPosted = 0, sendDone = 0;
};

// A header this rank heard between passes: from the left neighbour (taken off the link), or
// a partner's pass header (it stays with the agreement, which checks it when the pass opens).
struct Heard {
  GroupHeader header;
  int from = -1;
  bool fromLeft = false;
};

class Agreement {
 public:
  // `partners`: the links to this rank's recursive doubling partners (n > 2; empty else),
  // each with the partner's rank (Link::peerRank). `events`: what the links' fds are in.
  // `timeoutMs`: RR_TIMEOUT_MS, which bounds the grace an abort frame gets over a loss.
  Agreement(int rank, int size, Link& left, Link& right, std::vector<Link*> partners, EventSet& events,
            int timeoutMs);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int leftRank() const { return (rank_ - 1 + size_) % size_; }
  int rightRank() const { return (rank_ + 1) % size_; }

  // ---- Between passes.
  // The next header, if one has arrived (never waits): a partner's pass header first, then
  // the left neighbour's; proposals of collectives this rank completed are dropped.
  std::optional<Heard> nextHeader();
  // Posts `header` (a fusion proposal) on the right link; returns the link's send count
  // once it is out (compare with sent()).
  uint64_t postProposal(const GroupHeader& header);
  bool sent(uint64_t count) const { return right_.sendsDone() >= count; }
  // Between collectives: reads what the links hold without waiting; throws a neighbour's
  // abort frame (a closed connection is the next collective's to report).
  void idle();

  // ---- During a pass.
  // Opens a pass that runs this rank's `mine` (with partners where the schedule uses them),
  // `leftHeader`: the left neighbour's header when it came between passes (it is checked
  // here). Throws RR_ERR_MISMATCH, and what a pending abort says.
  void open(const GroupHeader& mine, bool partners, const GroupHeader* leftHeader);
  // What arrived since, in two looks per round of the pass's loop; each throws
  // RR_ERR_MISMATCH and returns whether anything moved. Before the receives are posted:
  // the partners' headers checked (on the ring, a partner's header of this collective
  // named), and this rank's header sent to a partner it is about to wait for, or to all
  // once every send is posted. After the links progressed: the left neighbour's header.
  bool pollPartners(const Schedule& s, const PassCounters& c);
  bool pollLeft();
  bool leftChecked() const { return leftOk_; }
  // The pass's gates. The link of a unit's send, with this rank's header ahead of the first
  // data for a partner.
  Link& sendLink(const Unit& u);
  // The link of a unit's receive, or nullptr while it may not be posted (a peer's data only
  // once its header has been checked).
  Link* recvLink(const Unit& u);
  // Whether every header of the pass is through: the left's (or every partner's) checked,
  // this rank's out on every link that carries it.
  bool settled() const;
  // The rank the pass waits for: a partner whose header, data or taking of data is awaited,
  // else the ring neighbour (left while receiving, right while sending); -1 where the pass
  // waits for no rank.
  int awaited(const Schedule& s, const PassCounters& c) const;
  bool usingPartners() const { return using_ == Using::kPartners; }
  // The pass completed collectives up to `lastSeq`: the header receives stay posted.
  void close(uint64_t lastSeq);

  // ---- The links.
  // Every link's progress (the ring's two, then the partners'); throws a peer's abort frame
  // of collective `seq` or an earlier one, or a loss (after preferring an abort, above).
  // True if anything moved. A TCP socket found empty is read again only once the event set
  // reports bytes on it: where a link in use waits for that, the set is dispatched first,
  // unless dispatched() was called since the last look.
  bool progressLinks(uint64_t seq);
  void dispatched() { polled_ = true; }
  // A later collective's abort kept by progressLinks (the next call throws it).
  const std::optional<Error>& pendingAbort() const { return pendingAbort_; }
  void throwPendingAbort() const {
    if (pendingAbort_) throw *pendingAbort_;
  }
  // At a timeout, while rank 0 is asked for the cause: what came on any link (an abort on
  // an idle one too); a neighbour's abort is thrown, a neighbour gone is not (rank 0's
  // answer is still worth waiting for).
  void watch(uint64_t seq);
  // Every link there is: the ring's two, then the partners'.
  const std::vector<Link*>& links() const { return all_; }

 private:
  // The receive of one peer's header: a fixed frame, then the counts of a fused pass.
  // Posted once (arm) and held until taken: a header may arrive before the pass that
  // checks it.
  struct Inbox {
    Link* link = nullptr;
    int rank = -1;
    uint8_t bytes[GroupHeader::kBytes] = {};
    uint64_t msg = 0;     // the link's receive count before the pending frame
    bool rest = false;    // the pending frame is the counts of a fused pass
    bool posted = false;  // a receive is outstanding, or its header not yet taken
    void arm();
    bool arrived();       // true once all of it is in `bytes` (false when not posted)
    GroupHeader peek() const { return GroupHeader::decode(bytes, rank); }
    GroupHeader take() {
      posted = false;
      return peek();
    }
  };
  // A recursive doubling partner and this pass's headers with it.
  struct Partner {
    int rank = -1;
    Link* link = nullptr;
    Inbox inbox;
    bool checked = false;  // its header of this pass has been checked
    uint64_t sent = 0;     // the link's send count once this rank's header was posted; 0: not yet
  };
  // Which links the running pass moves data on (between passes, every link).
  enum class Using : uint8_t { kAll, kRing, kPartners };

  bool uses(const Link* link) const;
  Partner& partner(int rank);
  void postToPartner(Partner& p);
  uint64_t postHeader(const GroupHeader& h, Link& link);
  // The left neighbour's next header once it is here, stale proposals dropped.
  std::optional<GroupHeader> leftHeaderIfArrived();
  bool staleProposal(const GroupHeader& h) const { return h.proposal && h.firstSeq <= doneSeq_; }
  bool checkPartnerHeaders();
  void checkStrayPartnerHeaders();
  void checkLeft(const GroupHeader& left);
  // Throws RR_ERR_MISMATCH naming both ranks and the first difference.
  void checkPeerHeader(int peer, const GroupHeader& theirs) const;
  // After `lost` failed with RR_ERR_PEER_LOST in collective `seq`: throws another link's
  // abort frame of this or an earlier collective if one comes within a short grace, else
  // returns (the caller reports the loss).
  void preferAbort(Link* lost, const Error& loss, uint64_t seq);

  int rank_;
  int size_;
  Link& left_;
  Link& right_;
  std::vector<Partner> partners_;
  std::vector<Link*> all_;
  GroupHeader lie_;  // where onTheWire writes a test lie  // right, left, then the partners' links (made once: asked in every loop)
  EventSet& events_;
  std::chrono::milliseconds abortGrace_;
  Inbox leftInbox_;
  uint8_t sentHeader_[GroupHeader::kBytes] = {};  // this rank's header of the pass, encoded
  size_t sentRestBytes_ = 0;                       // its counts frame (a fused pass), 0: none
  GroupHeader mine_{};                             // this rank's header of the running pass
  bool leftOk_ = false;                            // the left's header of the pass checked
  uint64_t rightSent_ = 0;                         // the right link's count once ours is out
  uint64_t doneSeq_ = 0;                           // the last collective a pass completed
  Using using_ = Using::kAll;
  bool polled_ = false;  // the event set was dispatched since progressLinks last looked
  std::optional<Error> pendingAbort_;
};

}  // namespace rr
