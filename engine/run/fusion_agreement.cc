// How ranks agree on what the next pass carries; see fusion_agreement.h.
#include "engine/run/fusion_agreement.h"

#include "base/error.h"
#include "kernels/dtype.h"

namespace rr {
namespace {

// Rank 0: proposes fusing `proposed` collectives from the front of `queue`; returns how many
// every rank has queued, or 1 when a rank started the front alone, with `left` set to the
// left neighbour's pass header when that came first (a partner's stays with the agreement).
size_t propose(const OpQueue& queue, const HeaderWaits& waits, const OpDesc& front, size_t proposed,
               std::optional<GroupHeader>& left) {
  GroupHeader proposal;
  proposal.proposal = true;
  proposal.firstSeq = front.seq;
  proposal.kind = front.kind;
  proposal.dtype = front.dtype;
  proposal.op = front.op;
  proposal.root = front.root;
  proposal.numOps = static_cast<uint32_t>(queue.describe(proposal.counts.data(), proposed));
  waits.propose(proposal);
  const Heard back = waits.header(front);
  if (!back.header.proposal) {  // a rank ran the front alone; this is a header of that pass
    if (back.fromLeft) left = back.header;
    return 1;
  }
  if (back.header.firstSeq != proposal.firstSeq || back.header.numOps < 1 || back.header.numOps > proposal.numOps)
    fail(RR_ERR_SYSTEM, "protocol error: rank {} returned the fusion proposal for op #{} as {} ops from op #{}",
         back.from, proposal.firstSeq, back.header.numOps, back.header.firstSeq);
  return back.header.numOps;
}

// Another rank with several fusible queued: the left neighbour's header (or a partner's); a
// proposal is cut to what is queued here, passed on, and the decision behind it returned.
Heard receiveDecision(const OpQueue& queue, const HeaderWaits& waits, const OpDesc& front, int rank,
                      size_t fusionBytes) {
  Heard heard = waits.header(front);
  checkFusionLimits(heard.header, heard.from, rank, fusionBytes);
  if (heard.header.proposal) {
    const size_t have = queue.matching(heard.header);
    if (have > 0) {
      heard.header.numOps = static_cast<uint32_t>(have);
      waits.propose(heard.header);
      heard = waits.header(front);
      checkFusionLimits(heard.header, heard.from, rank, fusionBytes);
    }
  }
  return heard;
}

}  // namespace

void checkFusionLimits(const GroupHeader& h, int from, int rank, size_t fusionBytes) {
  if (h.numOps <= 1) return;
  const char* what = h.proposal ? "fusion proposal" : "pass header";
  if (h.kind != Collective::kAllReduce)
    fail(RR_ERR_SYSTEM, "protocol error: rank {} sent a {} of {} collectives of kind {} in one pass (only "
         "all-reduces travel fused)", from, what, h.numOps, collectiveName(h.kind));
  uint64_t total = 0;
  const uint64_t es = dtypeSize(h.dtype);
  for (uint32_t i = 0; i < h.numOps; ++i) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(h.counts[i], es, &bytes) || __builtin_add_overflow(total, bytes, &total))
      total = UINT64_MAX;
  }
  if (fusionBytes == 0 || total > fusionBytes)
    fail(RR_ERR_SYSTEM, "protocol error: rank {} sent a {} of {} all-reduces ({} bytes) in one pass from {}, more than "
         "rank {} may fuse (RR_FUSION_BYTES={})", from, what, h.numOps, total, describeOp(h.opAt(0)), rank, fusionBytes);
}

PassDecision decidePass(Agreement& agreement, const OpQueue& queue, const HeaderWaits& waits, size_t fusionBytes) {
  const std::shared_ptr<Request> front = queue.peek();
  // What this rank could fuse with the front; with one collective (the usual case for a
  // blocking call) the pass starts at once, its header travelling with its data.
  const size_t fusible = fusionBytes > 0 ? queue.fusible(fusionBytes, GroupHeader::kMaxOps) : 1;
  PassDecision d;
  if (fusible <= 1) return d;
  if (agreement.rank() == 0) {
    // Propose fusing; what comes back is what every rank has queued, or the header of a
    // rank that started the front alone (it had only that one): then so does this rank.
    d.count = propose(queue, waits, front->desc, fusible, d.left);
    return d;
  }
  const Heard heard = receiveDecision(queue, waits, front->desc, agreement.rank(), fusionBytes);
  const GroupHeader& h = heard.header;
  const size_t have = queue.matching(h);
  if (h.proposal || have < h.numOps) {
    const std::optional<OpDesc> mine = queue.descAt(have);  // the first that differs is the one to name
    fail(RR_ERR_MISMATCH, "{}", mismatchText(heard.from, h.opAt(have), agreement.rank(), mine ? *mine : front->desc));
  }
  d.count = h.numOps;
  d.header = h;
  if (heard.fromLeft) d.left = h;  // a partner's header stays with the agreement, which checks it
  return d;
}

}  // namespace rr
