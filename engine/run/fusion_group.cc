// What a fused pass carries; see fusion_group.h.
#include "engine/run/fusion_group.h"

#include <cstdlib>
#include <cstring>

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
