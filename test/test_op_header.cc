// The op header's codec (engine/run/op_header.h): every field through encode and decode, the
// counts of a fused pass in a frame of their own, and every value no rank could send
// refused before anything is taken from it; the descriptions mismatch messages use.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/wire.h"
#include "engine/run/op_header.h"

namespace {

using Catch::Matchers::Contains;

rr::GroupHeader sample() {
  rr::GroupHeader h;
  h.firstSeq = 0x0123456789ULL;
  h.numOps = 3;
  h.kind = rr::Collective::kAllReduce;
  h.dtype = RR_BFLOAT16;
  h.op = RR_MAX;
  h.root = 0;
  h.algo = rr::Algorithm::kHd;
  h.device = true;
  h.counts[0] = 7;
  h.counts[1] = uint64_t{1} << 40;
  h.counts[2] = 0;
  return h;
}

}  // namespace

TEST_CASE("every field of the op header goes through encode and decode") {
  const rr::GroupHeader h = sample();
  uint8_t bytes[rr::GroupHeader::kBytes] = {};
  h.encode(bytes);
  CHECK(rr::GroupHeader::opsIn(bytes, 1) == 3);
  const rr::GroupHeader back = rr::GroupHeader::decode(bytes, 1);
  CHECK(back.firstSeq == h.firstSeq);
  CHECK(back.numOps == 3);
  CHECK(back.kind == h.kind);
  CHECK(back.dtype == h.dtype);
  CHECK(back.op == h.op);
  CHECK(back.algo == rr::Algorithm::kHd);
  CHECK(back.device);
  CHECK_FALSE(back.proposal);
  CHECK_FALSE(back.pairLink);
  for (int i = 0; i < 3; ++i) CHECK(back.counts[i] == h.counts[i]);
  // The counts beyond the first are a frame of their own: 8 bytes each after the fixed 40.
  CHECK(h.restBytes() == 16);
  CHECK(rr::wire::get64(bytes + rr::GroupHeader::kFixedBytes) == h.counts[1]);
  // A proposal and recursive doubling on the pair's own link.
  rr::GroupHeader p = sample();
  p.proposal = true;
  p.algo = rr::Algorithm::kRd;
  p.pairLink = true;
  p.device = false;
  p.encode(bytes);
  const rr::GroupHeader q = rr::GroupHeader::decode(bytes, 1);
  CHECK(q.proposal);
  CHECK(q.pairLink);
  CHECK_FALSE(q.device);
}

TEST_CASE("a header no rank could send is refused, naming the sender and the values") {
  uint8_t bytes[rr::GroupHeader::kBytes] = {};
  const auto broken = [&](size_t at, uint32_t value) {
    sample().encode(bytes);
    rr::wire::put32(bytes + at, value);
  };
  broken(8, 0);  // no ops
  CHECK_THROWS_WITH(rr::GroupHeader::opsIn(bytes, 3), "protocol error: rank 3 sent an op header with 0 ops");
  broken(8, rr::GroupHeader::kMaxOps + 1);
  CHECK_THROWS_WITH(rr::GroupHeader::decode(bytes, 3), Contains("257 ops"));
  broken(12, 9);  // kind
  CHECK_THROWS_WITH(rr::GroupHeader::decode(bytes, 3), Contains("kind 9"));
  broken(16, 99);  // dtype
  CHECK_THROWS_WITH(rr::GroupHeader::decode(bytes, 3), Contains("dtype 99"));
  broken(20, 17);  // op
  CHECK_THROWS_WITH(rr::GroupHeader::decode(bytes, 3), Contains("op 17"));
  for (uint32_t flags : {0x2u, 0x300u, 0x10000u | (2u << 8), 0x40000u, 0x80000000u}) {  // unknown bits, algorithm 3, a pair link off rd
    broken(28, flags);
    CHECK_THROWS_WITH(rr::GroupHeader::decode(bytes, 3), Contains("sent an op header with flags"));
  }
}

TEST_CASE("describeOp says what a collective of its kind uses; the mismatch text adds the field that differs") {
  rr::OpDesc a{57, rr::Collective::kAllReduce, RR_FLOAT32, RR_SUM, 0, 1024};
  CHECK(rr::describeOp(a) == "op #57 allreduce(count=1024, dtype=float, op=sum)");
  rr::OpDesc b = a;
  b.root = 5;  // an all-reduce's root is never printed: the difference is named instead
  CHECK_FALSE(rr::sameOp(a, b));
  CHECK(rr::opDifference(a, b) == "root 0 against 5");
  CHECK(rr::mismatchText(1, a, 2, b) ==
        "ranks disagree on a collective: rank 1 called op #57 allreduce(count=1024, dtype=float, op=sum), rank 2 "
        "called op #57 allreduce(count=1024, dtype=float, op=sum) (they differ in root 0 against 5)");
  rr::OpDesc c{58, rr::Collective::kBroadcast, RR_INT8, RR_SUM, 3, 9};
  CHECK(rr::describeOp(c) == "op #58 broadcast(count=9, dtype=int8, root=3)");
  CHECK(rr::opDifference(a, c) == "op number #57 against #58, kind allreduce against broadcast, count 1024 against 9, "
                                  "dtype float against int8, root 0 against 3");
  CHECK(rr::describeOp(rr::OpDesc{4, rr::Collective::kBarrier, RR_UINT8, RR_MAX, 0, 4}) == "op #4 barrier()");
}

TEST_CASE("onTheWire is the header itself where no test lie is told") {
  const rr::GroupHeader h = sample();
  rr::GroupHeader lie;
  const rr::GroupHeader& w = rr::onTheWire(h, lie);
  CHECK(w.numOps == h.numOps);
  CHECK(w.firstSeq == h.firstSeq);
  CHECK(w.counts[0] == h.counts[0]);
  CHECK(w.root == h.root);
}
