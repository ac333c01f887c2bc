// Fusion: small all-reduces queued together (same dtype and op, RR_FUSION_BYTES in all)
// share one ring pass, packed into one buffer and unpacked after it; each still completes
// as its own request. Who fuses what must be agreed, because a rank may not have
// submitted yet what another has queued (and may wait for an earlier result before it
// does); op_header.h has the protocol:
//
//   rank 0 with several fusible queued    proposes them (proposeFusion); the proposal goes
//                                         around the ring, cut by every rank to what it
//                                         has queued, and comes back as the decision
//   a rank with one queued                starts it alone at once (its header travels with
//                                         its data); a proposal that reaches it ends there,
//                                         and rank 0 then sees that rank's pass header
//                                         instead of its proposal: the pass carries one
//   any other rank                        waits for the left neighbour's proposal or pass
//                                         header (receiveDecision)
//
// A pass of recursive doubling (or halving-doubling) at n > 2 sends no header round the
// ring, only to its partners: so every rank waiting for a decision also takes a partner's
// pass header as one (ProgressEngine::receiveHeader), and a proposal that met a rank
// running alone by recursive doubling is dropped by that rank later, as a proposal of a
// collective it has completed (progress_engine.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/run/op_header.h"
#include "engine/run/op_queue.h"
#include "engine/run/progress_engine.h"
#include "engine/run/request.h"

namespace rr {

// The header of a pass that carries the first `count` of `ops`.
GroupHeader passHeader(const std::vector<std::shared_ptr<Request>>& ops, size_t count);

// Rank 0: proposes fusing `proposed` collectives from the front of `queue`; returns how many
// every rank has queued, or 1 when a rank started the front alone, with `left` set to the
// left neighbour's pass header when that came first (a partner's stays in the engine).
size_t proposeFusion(ProgressEngine& engine, const OpQueue& queue, const Request& front, size_t proposed,
                     std::optional<GroupHeader>& left);

// Another rank with several fusible queued: waits for the left neighbour's header (or a
// partner's); a proposal is cut to what is queued here, passed on, and the decision behind
// it returned. The caller checks the result against its queue (a mismatch names both ranks).
ProgressEngine::Heard receiveDecision(ProgressEngine& engine, const OpQueue& queue, const OpDesc& front,
                                      int rank, size_t fusionBytes);

// A header from rank `from` that would make this rank fuse more than it may: several
// collectives that are not all-reduces, more than RR_FUSION_BYTES in all, or any while
// fusion is off. Ranks agree on RR_FUSION_BYTES at init, so an honest rank never sends
// one: a protocol error (RR_ERR_SYSTEM) naming the sender, checked before this rank takes
// the header as its decision or cuts it as a proposal.
void checkFusionLimits(const GroupHeader& h, int from, int rank, size_t fusionBytes);

// The packing buffer, allocated once (RR_FUSION_BYTES; none when 0).
class FusionBuffer {
 public:
  explicit FusionBuffer(size_t bytes);
  // Copies the inputs of `ops` one after another; returns the buffer, which the pass
  // all-reduces in place.
  uint8_t* pack(const std::vector<std::shared_ptr<Request>>& ops);
  // Copies each request's part of the result to its output.
  void unpack(const std::vector<std::shared_ptr<Request>>& ops) const;

 private:
  std::unique_ptr<uint8_t, void (*)(void*)> buf_{nullptr, nullptr};
  size_t bytes_ = 0;
};

}  // namespace rr
