// libFuzzer target: the pass agreement (engine/run/agreement.h, fusion_agreement.h) of one
// rank against crafted messages from its peers, with buffers of several sizes. The input's
// first three bytes choose this rank (0 or 1), the job's size (2 to 5), RR_FUSION_BYTES (0,
// 4 KiB, 16 KiB or 64 KiB), the algorithm of its own passes, and its queue (1 to 16
// all-reduces of 64 to 16,384 floats); the rest is frames its left neighbour and partners
// send it: [link u8 | type u8 | length u16 | payload]. The rank decides its next pass as its
// progress thread would, packs what it decided into its fusion buffer (of RR_FUSION_BYTES),
// and runs the pass's headers. It must decide within its limits or throw an Error; nothing
// may crash, overrun a buffer (AddressSanitizer) or hang (every wait is bounded here).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "engine/plan/rd_schedule.h"
#include "engine/run/agreement.h"
#include "engine/run/fusion_agreement.h"
#include "engine/run/fusion_group.h"
#include "engine/run/op_queue.h"
#include "test/memory_link.h"

namespace {

using rr::test::MemoryLink;

rr::HeaderWaits boundedWaits(rr::Agreement& a) {
  return rr::HeaderWaits{[&a](const rr::OpDesc& next) {
                           for (int i = 0; i < 64; ++i) {
                             if (std::optional<rr::Heard> h = a.nextHeader()) return *h;
                             a.progressLinks(next.seq);
                           }
                           rr::fail(RR_ERR_TIMEOUT, "no header");
                         },
                         [&a](const rr::GroupHeader& proposal) {
                           const uint64_t sent = a.postProposal(proposal);
                           for (int i = 0; i < 64 && !a.sent(sent); ++i) a.progressLinks(proposal.firstSeq);
                         }};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const int rank = data[0] & 1;
  const int n = 2 + ((data[0] >> 1) & 3);
  const size_t fusionBytes = std::vector<size_t>{0, 4096, 16384, 65536}[(data[0] >> 3) & 3];
  const rr::Algorithm algo = static_cast<rr::Algorithm>(((data[0] >> 5) & 3) % 3);
  const size_t queued = 1 + (data[1] & 15);
  const size_t elems = 64 * (1 + (data[2] & 255));
  data += 3;
  size -= 3;

  // This rank's links; the other ends stay with this function, which sends on them.
  auto [rightEnd, rightPeer] = MemoryLink::pair(rank, (rank + 1) % n, n, "right neighbour", "left neighbour");
  auto [leftPeer, leftEnd] = MemoryLink::pair((rank - 1 + n) % n, rank, n, "right neighbour", "left neighbour");
  std::vector<std::unique_ptr<MemoryLink>> partnerEnds, partnerPeers;
  for (int p : rr::rdPartners(rank, n)) {
    auto [mine, theirs] = MemoryLink::pair(rank, p, n, "recursive doubling partner", "recursive doubling partner");
    partnerEnds.push_back(std::move(mine));
    partnerPeers.push_back(std::move(theirs));
  }
  // The peers' frames, as they would send them.
  while (size >= 4) {
    const size_t which = data[0] % (1 + partnerPeers.size());
    const uint32_t type = data[1];
    const size_t len = std::min<size_t>(data[2] | (data[3] << 8), size - 4);
    MemoryLink& from = which == 0 ? *leftPeer : *partnerPeers[which - 1];
    from.wire().push(from.end(), type, data + 4, len);
    data += 4 + len;
    size -= 4 + len;
  }

  rr::EventSet events;
  std::vector<rr::Link*> partners;
  for (auto& p : partnerEnds) partners.push_back(p.get());
  rr::Agreement agreement(rank, n, *leftEnd, *rightEnd, partners, events, 100);
  rr::OpQueue queue;
  std::deque<std::vector<float>> buffers;
  for (size_t i = 0; i < queued; ++i) {
    std::vector<float>& b = buffers.emplace_back(elems, 1.0f);
    auto r = std::make_shared<rr::Request>();
    r->desc = rr::OpDesc{0, rr::Collective::kAllReduce, RR_FLOAT32, RR_SUM, 0, elems};
    r->send = r->recv = b.data();
    r->bytes = elems * sizeof(float);
    queue.push(r);
  }
  rr::FusionBuffer fusion(fusionBytes);
  try {
    const rr::PassDecision d = rr::decidePass(agreement, queue, boundedWaits(agreement), fusionBytes);
    auto ops = queue.pop(d.count);
    if (ops.size() > 1) {  // a fused pass: packed, as the communicator packs it
      fusion.pack(ops);
      fusion.unpack(ops);
    }
    rr::GroupHeader mine = d.header ? *d.header : rr::passHeader(ops, ops.size());
    if (!d.header) mine.algo = algo;
    rr::ScheduleParams p;
    p.rank = rank;
    p.size = n;
    p.count = 0;
    for (const auto& r : ops) p.count += r->desc.count;
    p.segElems = 16384;
    p.depth = rr::kSegmentsInFlight;
    p.algo = mine.algo;
    p.pairLink = n == 2 && mine.algo == rr::Algorithm::kRd;
    const rr::Schedule s(p);
    agreement.open(mine, s.usesPartners(), d.left ? &*d.left : nullptr);
    const rr::PassCounters c{s.numUnits(), s.numUnits(), s.numUnits(), s.numUnits()};
    for (int round = 0; round < 64 && !agreement.settled(); ++round) {
      agreement.pollPartners(s, c);
      agreement.progressLinks(mine.firstSeq);
      agreement.pollLeft();
    }
    if (agreement.settled()) agreement.close(mine.firstSeq + mine.numOps - 1);
  } catch (const rr::Error&) {
  }
  return 0;
}
