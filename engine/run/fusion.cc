// Fusion; see fusion.h.
#include "engine/run/fusion.h"

#include <cstdlib>
#include <cstring>

#include "kernels/dtype.h"
#include "base/error.h"

namespace rr {

GroupHeader passHeader(const std::vector<std::shared_ptr<Request>>& ops, size_t count) {
  GroupHeader h;
  const OpDesc& first = ops.front()->desc;
  h.firstSeq = first.seq;
  h.numOps = static_cast<uint32_t>(count);
  h.kind = first.kind;
  h.dtype = first.dtype;
  h.op = first.op;
  h.root = first.root;
  for (size_t i = 0; i < count; ++i) h.counts[i] = ops[i]->desc.count;
  return h;
}

size_t proposeFusion(ProgressEngine& engine, const OpQueue& queue, const Request& front, size_t proposed,
                     std::optional<GroupHeader>& left) {
  GroupHeader proposal;
  proposal.proposal = true;
  proposal.firstSeq = front.desc.seq;
  proposal.kind = front.desc.kind;
  proposal.dtype = front.desc.dtype;
  proposal.op = front.desc.op;
  proposal.root = front.desc.root;
  proposal.numOps = static_cast<uint32_t>(queue.describe(proposal.counts.data(), proposed));
  engine.sendHeader(proposal);
  const ProgressEngine::Heard back = engine.receiveHeader(front.desc);
  if (!back.header.proposal) {  // a rank ran the front alone; this is a header of that pass
    if (back.fromLeft) left = back.header;
    return 1;
  }
  if (back.header.firstSeq != proposal.firstSeq || back.header.numOps < 1 || back.header.numOps > proposal.numOps)
    fail(RR_ERR_SYSTEM, "protocol error: the fusion proposal for op #{} came back as {} ops",
         proposal.firstSeq, back.header.numOps);
  return back.header.numOps;
}

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

ProgressEngine::Heard receiveDecision(ProgressEngine& engine, const OpQueue& queue, const OpDesc& front,
                                      int rank, size_t fusionBytes) {
  ProgressEngine::Heard heard = engine.receiveHeader(front);
  checkFusionLimits(heard.header, heard.from, rank, fusionBytes);
  if (heard.header.proposal) {  // cut it to what is queued here, pass it on, wait for the decision
    const size_t have = queue.matching(heard.header);
    if (have > 0) {
      heard.header.numOps = static_cast<uint32_t>(have);
      engine.sendHeader(heard.header);
      heard = engine.receiveHeader(front);
      checkFusionLimits(heard.header, heard.from, rank, fusionBytes);
    }
  }
  return heard;
}

FusionBuffer::FusionBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0)
    fail(RR_ERR_SYSTEM, "cannot allocate the {}-byte fusion buffer", bytes);
  buf_ = std::unique_ptr<uint8_t, void (*)(void*)>(static_cast<uint8_t*>(p), std::free);
}

uint8_t* FusionBuffer::pack(const std::vector<std::shared_ptr<Request>>& ops) {
  size_t total = 0;
  for (const auto& r : ops) total += r->bytes;
  if (total > bytes_)  // checkFusionLimits keeps every decision within the buffer
    fail(RR_ERR_INTERNAL, "internal error: {} fused collectives of {} bytes in all do not fit the {}-byte fusion buffer",
         ops.size(), total, bytes_);
  size_t offset = 0;
  for (const auto& r : ops) {
    std::memcpy(buf_.get() + offset, r->send, r->bytes);
    offset += r->bytes;
  }
  return buf_.get();
}

void FusionBuffer::unpack(const std::vector<std::shared_ptr<Request>>& ops) const {
  size_t offset = 0;
  for (const auto& r : ops) {
    std::memcpy(r->recv, buf_.get() + offset, r->bytes);
    offset += r->bytes;
  }
}

}  // namespace rr
