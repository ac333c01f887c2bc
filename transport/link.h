// Link: one connected peer, seen as two ordered streams of messages (docs/transports.md).
//
// Every call returns at once; completion is polled through monotone counters
// (sendsDone/recvsDone count messages finished, in posting order). A Link knows nothing
// about collectives: it moves byte ranges, checks that each frame has the type and length
// the receiver posted, and carries abort frames that name why a peer failed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "base/error.h"
#include "transport/event_set.h"
#include "base/test_lies.h"

namespace rr {

enum class FrameType : uint32_t { kData = 1, kOpHeader = 2, kAbort = 3 };

// "data", "op header", "abort", or "unknown" for a value off the wire.
inline const char* frameName(uint32_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kData: return "data";
    case FrameType::kOpHeader: return "op header";
    case FrameType::kAbort: return "abort";
  }
  return "unknown";
}

// The error an abort frame from `peer` reports: `origin` failed first, in its collective
// `seq`, with `code` and `reason` (code RR_SUCCESS or unknown: RR_ERR_PEER_LOST). An origin
// outside 0..jobSize-1 is a protocol error naming the peer: no rank could have sent it, and
// -1 would pass for this rank's own failure.
inline Error abortFrameError(int origin, uint32_t code, uint64_t seq, std::string reason, const std::string& peer,
                             int jobSize) {
  if (origin < 0 || origin >= jobSize)
    return Error(RR_ERR_SYSTEM, fmt::format("protocol error: {} sent an abort frame naming rank {}, which is not a "
                                            "rank of this job of {} (its reason: {})",
                                            peer, origin, jobSize, reason.substr(0, 200)));
  if (code == RR_SUCCESS || code > RR_ERR_INTERNAL) code = RR_ERR_PEER_LOST;
  std::string message = fmt::format("rank {} aborted the job: {} (reported by {})", origin, reason, peer);
  return Error(static_cast<rr_result_t>(code), message, origin, seq, std::move(reason));
}

// Tests: a data frame as a lying rank sends it (base/test_lies.h): 8 bytes longer,
// from a buffer of the lie's own (data-long), 4 bytes shorter (data-short), or typed as an
// op header (data-type). Nothing changes without those lies.
inline void lieAboutData(const void*& data, size_t& len, FrameType& type) {
  if (type != FrameType::kData) return;
  if (lying("data-long")) {
    static const std::vector<uint8_t> junk(size_t{16} << 20);
    if (len + 8 <= junk.size()) {
      data = junk.data();
      len += 8;
    }
  }
  if (lying("data-short") && len >= 4) len -= 4;
  if (lying("data-type")) type = FrameType::kOpHeader;
}

class Link {
 public:
  virtual ~Link() = default;

  // Queue one message. The memory must stay valid until the matching counter passes it.
  virtual void postSend(const void* data, size_t len, FrameType type) = 0;
  // Queue one receive; the peer's frame must have exactly this type and length.
  virtual void postRecv(void* data, size_t len, FrameType type) = 0;
  virtual uint64_t sendsDone() const = 0;
  virtual uint64_t recvsDone() const = 0;
  virtual uint64_t sendsPosted() const = 0;
  virtual uint64_t recvsPosted() const = 0;

  // Move whatever bytes can move now; true if any did. Throws Error when the peer closed,
  // sent an abort frame, or broke the framing.
  virtual bool progress() = 0;

  // Whether a receive posted here waits for the EventSet to report new bytes before
  // progress() reads again (TCP: its socket was found empty since the last report), so
  // that the engine dispatches the set before it looks again.
  virtual bool waitsForEvent() const { return false; }

  // Best effort, bounded in time: tell the peer that `originRank` failed in its collective
  // number `seq`, and why. Returns whether the frame went out whole.
  virtual bool sendAbort(int originRank, rr_result_t code, uint64_t seq,
                         const std::string& reason) noexcept = 0;
  // sendAbort in two halves, for a rank that tells every peer at once: a peer that takes
  // nothing in (stopped, its queue full) then costs the rank one wait, not one per link,
  // and delays no other peer's frame. startAbort puts the frame on its way; finishAbort
  // waits for it until `until` at most and says whether it went out whole. A transport
  // whose sends wait in a queue of its own (UCX) waits in finishAbort; by default
  // startAbort does all of sendAbort's work.
  virtual void startAbort(int originRank, rr_result_t code, uint64_t seq, const std::string& reason) noexcept {
    abortSent_ = sendAbort(originRank, code, seq, reason);
  }
  virtual bool finishAbort(std::chrono::steady_clock::time_point until) noexcept {
    (void)until;
    return abortSent_;
  }
  // Close every socket; the peer sees the connection end.
  virtual void shutdown() noexcept = 0;
  // After a failure, before the failed collective's buffers go back to their owner: the
  // link stops touching the buffers of operations still posted (a transport that moves
  // bytes on its own, as UCX does, cancels them and waits, bounded, until they end). The
  // link carries no data afterwards; sendAbort may still be called. In two halves, so
  // that a rank failing on several links waits for them all at once: beginQuiesce tells
  // the peer at once (UCX: that this rank reads no more of its frames); quiesce's bounds
  // count from `since`, the same moment for every link of the rank.
  virtual void beginQuiesce() noexcept {}
  virtual void quiesce(std::chrono::steady_clock::time_point since) noexcept { (void)since; }
  // Before shutdown at destroy: until the peer has taken in everything this link sent (a
  // transport whose completed sends may still depend on this process, as UCX's do, waits
  // for the peer to say so; a kernel socket needs nothing). In two halves, as the abort:
  // every link tells its peer first, then each waits until `until` at most, one bound for
  // the whole rank (kFarewellBound from the first call), however many peers are stopped.
  virtual void startFarewell() noexcept {}
  virtual void finishFarewell(std::chrono::steady_clock::time_point until) noexcept { (void)until; }
  static constexpr std::chrono::milliseconds kFarewellBound{2000};

  virtual int peerRank() const = 0;

  // Whether every data frame costs this link a round trip of its own (UCX's pull: a
  // descriptor, a read, an answer), so that fewer, larger segments move a bucket faster.
  // Both ends of a link answer alike; the engine cuts larger segments only when every link
  // of the job says so (bootstrap.cc), since every rank must cut a bucket alike.
  virtual bool prefersLargeFrames() const { return false; }

  // Whether this link moves a frame through buffers of the transport's own, so that a frame
  // larger than one of them is cut and copied in pieces (UCX's tcp: 256 KiB fragments), and
  // segments that fit one (kFragmentFrameBytes) move a bucket faster. Agreed on as
  // prefersLargeFrames is.
  virtual bool prefersFragmentFrames() const { return false; }
  // The largest segment such a link takes in one fragment of 256 KiB, headers included.
  static constexpr size_t kFragmentFrameBytes = size_t{224} << 10;

 protected:
  bool abortSent_ = false;  // the default startAbort's result, for finishAbort
};

}  // namespace rr
