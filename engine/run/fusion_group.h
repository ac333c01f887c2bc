// What a fused pass carries: small all-reduces queued together (same dtype and op,
// RR_FUSION_BYTES in all) share one pass, packed into one buffer and unpacked after it; each
// still completes as its own request. Which ones, every rank must agree on first
// (fusion_agreement.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/run/op_header.h"
#include "engine/run/request.h"

namespace rr {

// The header of a pass that carries the first `count` of `ops`.
GroupHeader passHeader(const std::vector<std::shared_ptr<Request>>& ops, size_t count);

// The packing buffer, allocated once (RR_FUSION_BYTES; none when 0).
class FusionBuffer {
 public:
  explicit FusionBuffer(size_t bytes);
  // Copies the inputs of `ops` one after another; returns the buffer, which the pass
  // all-reduces in place. Throws RR_ERR_INTERNAL where they do not fit (the agreement
  // never decides that: fusion_agreement.h).
  uint8_t* pack(const std::vector<std::shared_ptr<Request>>& ops);
  // Copies each request's part of the result to its output.
  void unpack(const std::vector<std::shared_ptr<Request>>& ops) const;

 private:
  std::unique_ptr<uint8_t, void (*)(void*)> buf_{nullptr, nullptr};
  size_t bytes_ = 0;
};

}  // namespace rr
