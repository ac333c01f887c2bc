// How ranks agree on what the next pass carries (docs/design.md, "Fusion"). A rank may not
// have submitted yet what another has queued (and may wait for an earlier result before it
// does), so fusion is agreed before the pass:
//
//   rank 0 with several fusible queued    proposes them; the proposal goes around the ring,
//                                         cut by every rank to what it has queued itself
//                                         (and may fuse), and comes back as the decision
//   a rank with one queued                starts it alone at once (its header travels with
//                                         its data); a proposal that reaches it ends there
//                                         (Agreement::pollLeft), and rank 0 then sees that
//                                         rank's pass header instead of its proposal
//   any other rank                        waits for the left neighbour's proposal or pass
//                                         header, or a partner's pass header (a partner ran
//                                         the front alone by recursive doubling, or a
//                                         decision came round without passing this rank)
//
// A header that would make this rank fuse more than it may (more bytes than RR_FUSION_BYTES,
// collectives that are not all-reduces, any while fusion is off) is a protocol error naming
// the sender: ranks agree on RR_FUSION_BYTES at init, so no honest rank sends one, and no
// byte a peer names ever reaches past this rank's fusion buffer.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "engine/run/agreement.h"
#include "engine/run/op_header.h"
#include "engine/run/op_queue.h"

namespace rr {

// How this rank waits between passes (the progress engine's deadline and stall reports):
// for the next header, and until a posted proposal is out.
struct HeaderWaits {
  std::function<Heard(const OpDesc& next)> header;
  std::function<void(const GroupHeader& proposal)> propose;
};

// What the next pass carries: `count` collectives from the front of the queue, run with
// `header` where a peer decided (else this rank's own header of them), with the left
// neighbour's header when it came already (the agreement checks it as the pass opens).
struct PassDecision {
  size_t count = 1;
  std::optional<GroupHeader> header;  // a peer's decision: the pass's header
  std::optional<GroupHeader> left;    // the left neighbour's header, heard already
};

// The decision for the pass of the queue's front (on a job of more than one rank). Throws
// RR_ERR_MISMATCH where a peer's decision names collectives this rank has not queued (the
// first that differs named), RR_ERR_SYSTEM for a header beyond this rank's limits.
PassDecision decidePass(Agreement& agreement, const OpQueue& queue, const HeaderWaits& waits, size_t fusionBytes);

// A header from rank `from` that would make this rank fuse more than it may (above):
// throws RR_ERR_SYSTEM naming the sender.
void checkFusionLimits(const GroupHeader& h, int from, int rank, size_t fusionBytes);

}  // namespace rr
