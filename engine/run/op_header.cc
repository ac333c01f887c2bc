// GroupHeader encoding and the descriptions used in mismatch messages.
#include "engine/run/op_header.h"

#include "kernels/dtype.h"
#include <algorithm>

#include "base/error.h"
#include "base/test_lies.h"
#include "base/wire.h"

namespace rr {

void GroupHeader::encode(uint8_t* p) const {
  wire::put64(p, firstSeq);
  wire::put32(p + 8, numOps);
  wire::put32(p + 12, static_cast<uint32_t>(kind));
  wire::put32(p + 16, static_cast<uint32_t>(dtype));
  wire::put32(p + 20, static_cast<uint32_t>(op));
  wire::put32(p + 24, static_cast<uint32_t>(root));
  wire::put32(p + 28, (proposal ? 1U : 0U) | static_cast<uint32_t>(algo) << 8 | (pairLink ? 1U : 0U) << 16 |
                          (device ? 1U : 0U) << 17);
  for (uint32_t i = 0; i < numOps; ++i) wire::put64(p + 32 + 8 * i, counts[i]);
  if (lying("header-dtype")) wire::put32(p + 16, 99);  // tests: a dtype no rank could send
}

uint32_t GroupHeader::opsIn(const uint8_t* p, int fromRank) {
  const uint32_t ops = wire::get32(p + 8);
  if (ops == 0 || ops > kMaxOps)
    fail(RR_ERR_SYSTEM, "protocol error: rank {} sent an op header with {} ops", fromRank, ops);
  return ops;
}

GroupHeader GroupHeader::decode(const uint8_t* p, int fromRank) {
  GroupHeader h;
  h.firstSeq = wire::get64(p);
  h.numOps = wire::get32(p + 8);
  const uint32_t kind = wire::get32(p + 12), dtype = wire::get32(p + 16), op = wire::get32(p + 20);
  if (h.numOps == 0 || h.numOps > kMaxOps || kind > static_cast<uint32_t>(Collective::kBarrier) || !dtypeValid(static_cast<int>(dtype)) ||
      !opValid(static_cast<int>(op)))
    fail(RR_ERR_SYSTEM,
         "protocol error: rank {} sent an op header with {} ops, kind {}, dtype {}, op {}",
         fromRank, h.numOps, kind, dtype, op);
  h.kind = static_cast<Collective>(kind);
  h.dtype = static_cast<rr_dtype_t>(dtype);
  h.op = static_cast<rr_op_t>(op);
  h.root = static_cast<int32_t>(wire::get32(p + 24));
  const uint32_t flags = wire::get32(p + 28);
  const uint32_t algo = (flags >> 8) & 0xff;
  const bool pairLink = ((flags >> 16) & 1) != 0;
  if ((flags & 0xfffc00fe) != 0 || algo > static_cast<uint32_t>(Algorithm::kHd) ||
      (pairLink && algo != static_cast<uint32_t>(Algorithm::kRd)))
    fail(RR_ERR_SYSTEM, "protocol error: rank {} sent an op header with flags {:#x}", fromRank, flags);
  h.proposal = (flags & 1) != 0;
  h.algo = static_cast<Algorithm>(algo);
  h.pairLink = pairLink;
  h.device = ((flags >> 17) & 1) != 0;
  for (uint32_t i = 0; i < h.numOps; ++i) h.counts[i] = wire::get64(p + 32 + 8 * i);
  return h;
}

const GroupHeader& onTheWire(const GroupHeader& h, GroupHeader& w) {
  const bool oversize = lying("fusion-oversize") && h.kind == Collective::kAllReduce;
  if (!oversize && !lying("header-count") && !lying("header-seq") && !lying("header-root")) return h;
  w = h;
  if (oversize) {
    w.numOps = static_cast<uint32_t>(std::min<size_t>(h.numOps + 4, GroupHeader::kMaxOps));
    for (uint32_t i = h.numOps; i < w.numOps; ++i) w.counts[i] = h.counts[0];
  }
  if (lying("header-count")) w.counts[0] = uint64_t{1} << 62;
  if (lying("header-seq")) w.firstSeq += 1000;
  if (lying("header-root")) w.root = 5;
  return w;
}

OpDesc GroupHeader::opAt(size_t i) const {
  return OpDesc{firstSeq + i, kind, dtype, op, root, counts[i]};
}

std::string describeOp(const OpDesc& op) {
  std::string s = fmt::format("op #{} {}(count={}, dtype={}", op.seq, collectiveName(op.kind),
                              op.count, dtypeName(op.dtype));
  if (op.kind == Collective::kAllReduce || op.kind == Collective::kReduceScatter)
    s += fmt::format(", op={}", opName(op.op));
  if (op.kind == Collective::kBroadcast) s += fmt::format(", root={}", op.root);
  if (op.kind == Collective::kBarrier) return fmt::format("op #{} barrier()", op.seq);
  return s + ")";
}

bool sameOp(const OpDesc& a, const OpDesc& b) {
  return a.seq == b.seq && a.kind == b.kind && a.dtype == b.dtype && a.op == b.op &&
         a.root == b.root && a.count == b.count;
}

std::string opDifference(const OpDesc& a, const OpDesc& b) {
  std::string out;
  const auto add = [&out](const char* field, const std::string& x, const std::string& y) {
    out += fmt::format("{}{} {} against {}", out.empty() ? "" : ", ", field, x, y);
  };
  if (a.seq != b.seq) add("op number", fmt::format("#{}", a.seq), fmt::format("#{}", b.seq));
  if (a.kind != b.kind) add("kind", collectiveName(a.kind), collectiveName(b.kind));
  if (a.count != b.count) add("count", std::to_string(a.count), std::to_string(b.count));
  if (a.dtype != b.dtype) add("dtype", dtypeName(a.dtype), dtypeName(b.dtype));
  if (a.op != b.op) add("op", opName(a.op), opName(b.op));
  if (a.root != b.root) add("root", std::to_string(a.root), std::to_string(b.root));
  return out;
}

std::string mismatchText(int rankA, const OpDesc& a, int rankB, const OpDesc& b) {
  const std::string differ = opDifference(a, b);
  return fmt::format("ranks disagree on a collective: rank {} called {}, rank {} called {}{}", rankA, describeOp(a),
                     rankB, describeOp(b), differ.empty() ? "" : " (they differ in " + differ + ")");
}

}  // namespace rr
