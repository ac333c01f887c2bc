// The header that precedes every pass (docs/design.md, "Wire formats"): the collectives the
// pass carries.
//
//   frame 1 (40 bytes):  first seq u64 | ops u32 | kind u32 | dtype u32 | op u32 | root i32 |
//                        flags u32 (bit 0: a fusion proposal; bits 8-15: the all-reduce's
//                        algorithm, 0 ring, 1 recursive doubling, 2 halving-doubling;
//                        bit 16: recursive doubling at n = 2 on the pair's own link;
//                        bit 17: the bucket is in GPU memory) |
//                        count u64
//   frame 2 (ops > 1):   count u64 x (ops - 1)
//
// Every rank sends its own header right as a pass starts, its first data right behind it,
// and checks its left neighbour's before it takes any of that neighbour's data; a rank
// whose submission differs fails with RR_ERR_MISMATCH naming both ranks and both calls.
// So a pass of one collective waits for no header to go around the ring.
//
// Fusion needs agreement first, because a rank may not have submitted yet what rank 0 has
// queued (and may be waiting for its earlier all-reduce before it submits the next): rank 0
// sends a proposal of the all-reduces it could fuse; each rank cuts it down to those it has
// queued itself and forwards it; what comes back to rank 0 is queued everywhere, and that is
// what the pass then carries. A rank with one collective queued does not wait for that: it
// starts it alone, and a proposal that reaches it ends there (fusion_agreement.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/run/request.h"

namespace rr {

struct GroupHeader {
  static constexpr size_t kMaxOps = 256;
  static constexpr size_t kBytes = 32 + 8 * kMaxOps;
  static constexpr size_t kFixedBytes = 40;  // frame 1: the fields and the first count

  uint64_t firstSeq = 0;
  uint32_t numOps = 0;
  Collective kind = Collective::kAllReduce;
  rr_dtype_t dtype = RR_FLOAT32;
  rr_op_t op = RR_SUM;
  int root = 0;
  bool proposal = false;
  Algorithm algo = Algorithm::kRing;  // how the pass runs (a proposal's is not read)
  bool pairLink = false;              // ScheduleParams::pairLink (kRd only)
  bool device = false;                // the bucket is in GPU memory (a pass header's; named where
                                      // it makes ranks run different algorithms)
  std::array<uint64_t, kMaxOps> counts{};

  void encode(uint8_t* out) const;
  // Throws RR_ERR_SYSTEM (protocol error) for values no rank could have sent.
  static GroupHeader decode(const uint8_t* in, int fromRank);
  // The op count in frame 1, checked (RR_ERR_SYSTEM) before frame 2 is received.
  static uint32_t opsIn(const uint8_t* in, int fromRank);
  // The length of frame 2 (0 for one op).
  size_t restBytes() const { return 8 * (numOps - 1); }
  // The i-th collective the header describes.
  OpDesc opAt(size_t i) const;
};

// The header as this rank puts it on the wire: `h` itself, but under a test lie
// (base/test_lies.h) one that names 4 all-reduces more (fusion-oversize), a count of
// 2^62 (header-count), an op number 1000 ahead (header-seq) or root 5 (header-root);
// encode() writes dtype 99 under header-dtype. A lie is written into `lie`, which is then
// returned; without one, `h` is (no copy: a header is 2 KiB, and this is every pass's).
const GroupHeader& onTheWire(const GroupHeader& h, GroupHeader& lie);

// "op #57 allreduce(count=1024, dtype=float, op=sum)"
std::string describeOp(const OpDesc& op);
bool sameOp(const OpDesc& a, const OpDesc& b);
// The fields in which two collectives differ, with both values: "count 1024 against 2048,
// root 5 against 0" ("" when they are the same), for mismatch messages: describeOp leaves
// out what a collective of that kind does not use (an all-reduce's root).
std::string opDifference(const OpDesc& a, const OpDesc& b);
// "ranks disagree on a collective: rank 1 called X, rank 2 called Y (they differ in ...)".
std::string mismatchText(int rankA, const OpDesc& a, int rankB, const OpDesc& b);

}  // namespace rr
