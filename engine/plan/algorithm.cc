// The algorithm choice; see algorithm.h.
#include "engine/plan/algorithm.h"

#include <algorithm>

#include "engine/plan/hd_schedule.h"
#include "engine/plan/rd_schedule.h"
#include "kernels/dtype.h"
#include "transport/link.h"

namespace rr {

size_t rdMaxBytes(int size, Span span) {
  // At 2 ranks both algorithms send the bucket once, and the ring's second hop costs more
  // than one whole-bucket exchange; from 3 ranks recursive doubling sends the whole bucket
  // log2 n times, so it pays only while the ring's extra steps cost more than the bytes:
  // longer on one host than across hosts (docs/performance.md, "Algorithm thresholds").
  if (size <= 2) return size_t{64} << 10;
  if (span == Span::kHosts) return size == 3 ? size_t{8} << 10 : size_t{16} << 10;
  return size == 3 ? size_t{16} << 10 : size_t{32} << 10;
}

size_t hdMaxBytes(int size, bool pulledFrames) {
  // The ring's bytes in 2 log2 n exchanges: ahead of the ring's 2(n-1) hops up to a few
  // MiB, and at n = 4 up to 16 MiB (where pulled frames make each step wait for whole
  // halves, the ring from 1 MiB); where n is not a power of two its fold costs more than
  // it saves (docs/performance.md, "Algorithm thresholds").
  const bool powerOfTwo = (size & (size - 1)) == 0;
  if (!hdSupports(size) || !powerOfTwo) return 0;
  if (size == 4) return pulledFrames ? size_t{1} << 20 : size_t{16} << 20;
  return size_t{2} << 20;
}

Algorithm algorithmFor(const JobFacts& job, Collective kind, size_t bytes, bool device) {
  const bool allReduce = kind == Collective::kAllReduce || kind == Collective::kBarrier;
  if (!allReduce || !rdSupports(job.size) || job.algo == "ring" || (device && job.size > 2)) return Algorithm::kRing;
  if (job.algo == "rd") return Algorithm::kRd;
  if (job.algo == "hd") return hdSupports(job.size) ? Algorithm::kHd : Algorithm::kRing;  // n = 2: the same exchanges
  if (bytes <= rdMaxBytes(job.size, job.span)) return Algorithm::kRd;
  return bytes <= hdMaxBytes(job.size, job.pulledFrames) ? Algorithm::kHd : Algorithm::kRing;
}

ScheduleParams planPass(const JobFacts& job, Collective kind, rr_dtype_t dtype, size_t count, int root, bool device) {
  const size_t es = dtypeSize(dtype);
  const size_t n = static_cast<size_t>(job.size);
  ScheduleParams params;
  params.kind = kind == Collective::kBarrier ? Collective::kAllReduce : kind;
  params.rank = job.rank;
  params.size = job.size;
  params.count = count;
  params.depth = kSegmentsInFlight;
  params.root = root;
  params.algo = algorithmFor(job, kind, count * es, device);
  params.pairLink = pairLinkFor(job.size, params.algo, count * es, device);
  // Segments: a quarter of the largest block, rounded up to 4 KiB, at least 64 KiB (below,
  // a segment costs more in frames and wake-ups than its pipelining saves) and at most
  // RR_SEGMENT_BYTES; a broadcast chain is n-1 hops deep, so it cuts the whole bucket in
  // eight. Where every link pulls (a round trip per frame), at least 128 KiB; where every
  // link copies through fragments (UCX's tcp), a ring pass cuts at most one fragment's
  // worth, halving-doubling keeps its own (docs/performance.md, "Segments").
  const bool blocks = kind == Collective::kAllGather || kind == Collective::kReduceScatter;
  const size_t blockBytes = blocks ? count * es : (count * es + n - 1) / n;
  const size_t wanted = kind == Collective::kBroadcast ? count * es / 8
                                                       : (blockBytes + kSegmentsInFlight - 1) / kSegmentsInFlight;
  const size_t minSegment = job.pulledFrames ? kPulledSegmentBytes : size_t{64} << 10;
  const bool oneFragment = job.fragmentFrames && params.algo == Algorithm::kRing;
  const size_t maxSegment = oneFragment ? std::min(Link::kFragmentFrameBytes, job.segmentBytes) : job.segmentBytes;
  const size_t segBytes =
      std::clamp<size_t>((wanted + 4095) / 4096 * 4096, std::min(minSegment, maxSegment), maxSegment);
  params.segElems = std::max<size_t>(1, segBytes / es);
  return params;
}

}  // namespace rr
