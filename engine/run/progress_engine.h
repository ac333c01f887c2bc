// ProgressEngine: runs ring passes over the left and right links without blocking on any
// single transfer, with every wait bounded by the no-progress deadline. What a pass does
// with the bytes is a Pass (pass.h): HostPass for host memory, DevicePass for a GPU's; the
// engine owns their staging (host slots, and the device's pinned slots once a device is
// attached) and the loop that drives them.
//
// Every ring pass starts with a GroupHeader (op_header.h): each rank sends its own right,
// with the pass's data behind it, and checks its left neighbour's (run()); only a fusion
// proposal goes around the ring first (sendHeader, receiveHeader). A pass of recursive
// doubling (or halving-doubling, on the same partners; "recursive doubling" below stands
// for both) at n > 2 sends nothing on the ring: its header goes to every partner on the
// partner's link, right ahead of its first data for it (or before this rank first waits
// for the partner's data, as the fold's receiving rank does), and each partner's is checked
// before any of its data is taken. So a rank that waits for a fusion decision watches its
// partners' links too: a partner's pass header is the decision (the partner ran the front
// alone, or a decision came round without passing this rank's ring link), and a proposal
// that met a rank running alone by recursive doubling stays unread on that rank's ring link
// until its next read there drops it (a proposal of a collective this rank has completed).
// Between collectives the partners' links (and, after a recursive doubling pass, the left
// link) keep a header receive posted: a partner's header for the next collective lands
// early, and a ring pass that meets one for its own collective names the algorithm mismatch.
// A neighbour's or partner's abort frame fails the running pass, unless it comes from a
// later collective (the neighbour finished this one and failed in the next): then this rank
// finishes its part and the abort fails its next call.
//
// A pass that makes no progress for the timeout fails with RR_ERR_TIMEOUT naming what it
// waited for: the left neighbour's data, the right neighbour taking data, or device work
// that has not finished (named with its GPU).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/run/op_header.h"
#include "engine/run/pass.h"
#include "engine/observe/stall_monitor.h"
#include "engine/plan/schedule.h"
#include "kernels/device.h"
#include "kernels/reduce.h"
#include "base/error.h"
#include "transport/link.h"
#include "base/clock.h"

namespace rr {

// When a pass reached each phase, for the timeline.
struct PassTimes {
  Clock::time_point start, peers, reduced, end;
};

class ProgressEngine {
 public:
  static constexpr int kDepth = PassShape::kDepth;

  // onIdle runs every 100 ms while the engine runs a pass or waits; once `aborted` is set,
  // every wait throws RR_ERR_ABORTED (the setter also wakes the event set). For `spin` after
  // its last progress a waiting pass only looks at its links instead of sleeping (RR_SPIN_US).
  // `partners`: the links to recursive doubling partners (rd_schedule.h; none at n <= 2).
  ProgressEngine(int rank, int size, Link* left, Link* right, std::vector<PartnerLink> partners,
                 EventSet& events, size_t segmentBytes, int timeoutMs, std::chrono::microseconds spin,
                 std::function<void()> onIdle, const std::atomic<bool>* aborted);
  ~ProgressEngine();

  size_t segmentBytes() const { return segmentBytes_; }
  // What the engine is stalled on now (seq 0: not in a collective; on kNothing: moving).
  // Kind and bytes are the caller's to fill in.
  const StallState& stall() const { return stall_; }
  // At a timeout, asks for the cause (StallMonitor::explain); its answer leads the message.
  // The second argument is to be called while the answer is awaited: it watches the links
  // and throws a neighbour's abort, which then comes without the wait.
  using Explain = std::function<StallCause(const StallState&, const std::function<void()>&)>;
  void setExplain(Explain explain) { explain_ = std::move(explain); }
  // Tests (RR_TEST_PAUSE_AFTER_SENDS_MS): in the first pass that gets there, with every send
  // posted and not all of them done, this rank stops `ms` (its neighbours move on meanwhile).
  void setTestPause(int ms) { testPauseMs_ = ms; }
  // Allocates the pinned staging of device passes, once; later passes must use the same
  // device. The staging's address is devStaging(). Called on the submitting thread when the communicator opens its GPU, before any
  // request holds a stream (the allocation synchronises the device).
  void attachDevice(Device* device);
  uint8_t* devStaging() const { return devStaging_; }

  // Waits for the next header from the left (a proposal or a pass header) or a partner's
  // pass header, whichever comes first (a partner's first); `next` is this rank's next
  // collective, named if the wait times out. A partner's header stays in its inbox: the
  // pass checks it (run() with leftHeader nullptr).
  struct Heard {
    GroupHeader header;
    int from = -1;        // the rank that sent it
    bool fromLeft = false;
  };
  Heard receiveHeader(const OpDesc& next);
  // Between collectives: reads what the links hold without waiting; throws Error for a
  // neighbour's abort frame (a closed connection is reported by the next collective).
  void pollIdle();
  // Sends a header right and waits until the kernel has it (used for fusion proposals).
  void sendHeader(const GroupHeader& header);
  // Runs one pass: sends `header` (what this rank runs) right, its data right behind it,
  // and checks the left neighbour's header against it before taking any of its data
  // (RR_ERR_MISMATCH naming both ranks and both calls); recursive doubling at n > 2 does
  // the same with each partner instead. `leftHeader`: the left's header when the caller
  // already received it (a fusion decision from the left), else nullptr. A fusion
  // proposal that comes instead is absorbed when this rank runs one collective alone (it
  // cannot have fused more). With `device`, send and recv are that device's memory (see
  // above) and its work was queued at submission (queueDeviceWork, with `deviceBase`); the
  // device must stay the same for the engine's lifetime. Throws Error on
  // mismatch, timeout, or peer failure, DeviceError when a CUDA call fails.
  PassTimes run(const Schedule& schedule, const GroupHeader& header, const GroupHeader* leftHeader,
                const void* send, void* recv, Device* device = nullptr, uint32_t deviceBase = 0);

 private:
  // The receive of one peer's op header: a fixed frame, then the counts of a fused pass.
  // Posted once (arm) and held until taken: a header may arrive before the pass that
  // checks it.
  struct HeaderInbox {
    Link* link = nullptr;
    int rank = -1;
    uint8_t bytes[GroupHeader::kBytes] = {};
    uint64_t msg = 0;     // the link's receive count before the pending frame
    bool rest = false;    // the pending frame is the counts of a fused pass
    bool posted = false;  // a receive is outstanding, or its header not yet taken
    void arm();           // posts the receive unless posted
    bool arrived();       // true once all of it is in `bytes` (false when not posted)
    GroupHeader peek() const { return GroupHeader::decode(bytes, rank); }
    GroupHeader take() {
      posted = false;
      return peek();
    }
  };

  // Every link's progress. A TCP socket found empty is read again only once epoll reports
  // bytes on it (tcp_link.h): where a link this pass uses waits for that, epoll is asked
  // first, unless wait() asked since the last look. (A link the pass does not use holds
  // only a header receive for later; it is read after the next dispatch.)
  bool progressLinks(uint64_t seq);
  void idleDuties();  // onIdle, at most every 100 ms
  // Whether the running pass moves anything on `link` (a ring pass at n > 2 does not use
  // the partners' links, recursive doubling not the ring's); between passes, every link.
  enum class Using : uint8_t { kAll, kRing, kPartners };
  bool uses(const Link* link) const;
  // Every link: the ring's two, then the partners'.
  template <typename F>
  void forEachLink(F&& f) {
    f(right_);
    f(left_);
    for (PartnerLink& p : partners_) f(p.link);
  }
  // Checks the partners' headers that arrived; true if any did.
  bool checkPartnerHeaders(const GroupHeader& mine);
  // A ring pass at n > 2: a partner's header for this collective (or an earlier one) means
  // the partner runs recursive doubling: named (RR_ERR_MISMATCH); a later one waits.
  void checkStrayPartnerHeaders(const GroupHeader& mine);
  void armPartners() {
    for (HeaderInbox& in : partnerInbox_) in.arm();
  }
  bool partnersDone() const;
  // The partner a pass waits for (its header, or the data of unit `recvDone`), or -1.
  int awaitedPartner(const Schedule& s, const PassCounters& c) const;
  // After `lost` failed with RR_ERR_PEER_LOST in collective `seq`: throws the other link's
  // abort frame of this or an earlier collective if one comes within a short grace, else
  // returns (the caller reports the loss).
  void preferAbort(Link* lost, const Error& loss, uint64_t seq);
  // A header's frames on `link` (encoded in sentHeader_ first); returns the link's send
  // count once they are out.
  uint64_t postHeader(const GroupHeader& h, Link& link);
  // The left neighbour's next header once it is here (its receive posted if it was not),
  // proposals of collectives this rank has completed dropped (one met a rank that ran that
  // collective alone by recursive doubling, which reads nothing from its ring link).
  std::optional<GroupHeader> leftHeaderIfArrived();
  // A proposal of a collective this rank has completed: it met a rank that ran that
  // collective alone by recursive doubling, so it cannot be live (dropped where read).
  bool staleProposal(const GroupHeader& h) const { return h.proposal && h.firstSeq <= doneSeq_; }
  int leftRank() const { return (rank_ - 1 + size_) % size_; }
  // Throws RR_ERR_MISMATCH naming both ranks and the first collective they disagree on.
  void checkLeftHeader(const GroupHeader& left, const GroupHeader& mine) const {
    checkPeerHeader(leftRank(), left, mine);
  }
  void checkPeerHeader(int peer, const GroupHeader& theirs, const GroupHeader& mine) const;
  // Waits for an event until `deadline`; only looks while within the spin window after
  // `since` (the last progress) or while device work is pending.
  void wait(Clock::time_point deadline, Clock::time_point since, bool devicePending = false);
  // `partner`: the recursive doubling or halving-doubling partner waited for (`algo` says
  // which), else -1 (a ring neighbour).
  [[noreturn]] void timeout(const std::string& what, bool waitingForLeft, size_t done,
                            size_t total, int partner = -1, Algorithm algo = Algorithm::kRing);
  // Marks the engine stalled in op `seq` on `on` since `since` (kNothing: it moved), waiting
  // for rank `peer` (-1: the neighbour `on` names).
  void stalledOn(uint64_t seq, WaitingOn on, Clock::time_point since, int peer = -1);
  Clock::time_point deadline() const;
  void checkAborted() const;

  int rank_;
  int size_;
  Link* left_;
  Link* right_;
  std::vector<PartnerLink> partners_;
  std::vector<HeaderInbox> partnerInbox_;  // one per partner, in partners_' order
  EventSet& events_;
  size_t segmentBytes_;
  int timeoutMs_;
  std::chrono::microseconds spin_;
  std::function<void()> onIdle_;
  const std::atomic<bool>* aborted_;
  Clock::time_point lastIdle_;
  ReduceFn reduce_;
  ScaleFn scale_;
  uint8_t* staging_ = nullptr;       // host passes' in- and out-slots
  Device* device_ = nullptr;         // set by attachDevice
  uint8_t* devStaging_ = nullptr;    // device passes' in-, out- and send-slots, pinned by device_
  std::optional<Error> pendingAbort_;
  bool polled_ = false;  // events_ dispatched since progressLinks last looked
  int testPauseMs_ = 0;  // tests: once, with every send of a pass posted, stop this long
  StallState stall_;
  Explain explain_;
  uint8_t sentHeader_[GroupHeader::kBytes] = {};
  HeaderInbox leftInbox_;
  uint64_t doneSeq_ = 0;  // the last collective a pass of this rank completed
  Using using_ = Using::kAll;
};

}  // namespace rr
