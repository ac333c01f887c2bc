// The algorithm choice: which schedule a collective's pass takes, and how its bucket is cut
// into segments (docs/design.md, "Algorithms"; the thresholds' measurements are in
// docs/performance.md, "Algorithm thresholds"). It depends only on the collective and on
// what every rank knows alike: job-wide settings agreed at init (RR_ALGO, RR_SEGMENT_BYTES)
// and facts every rank learns at init (the job's size, whether it spans hosts, what every
// link prefers). So every rank plans a pass alike, and the op header carries the algorithm
// so that a rank that differs is named.
//
// A new algorithm: its units in a schedule file of its own (as rd_schedule.h), its case in
// Schedule (schedule.cc), and its place in algorithmFor here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/plan/schedule.h"
#include "ringreduce/ringreduce.h"

namespace rr {

// Where the job's ranks are: on one host (every rank published the same IP at init,
// engine/setup/bootstrap.h), or on several, whose links carry less than memory does.
enum class Span : uint8_t { kOneHost, kHosts };

// What every rank of a job knows alike, by which it plans each pass.
struct JobFacts {
  int rank = 0;
  int size = 1;
  std::string algo = "auto";       // RR_ALGO: auto, ring, rd, hd
  Span span = Span::kHosts;
  bool pulledFrames = false;       // every link reads its peers' frames (UCX's pull)
  bool fragmentFrames = false;     // every link copies frames through fragments (UCX's tcp)
  size_t segmentBytes = 1 << 20;   // RR_SEGMENT_BYTES: the largest segment
};

// auto's largest bucket for recursive doubling, and for halving-doubling above it (0: never;
// only where n is a power of two from 4).
size_t rdMaxBytes(int size, Span span);
size_t hdMaxBytes(int size, bool pulledFrames = false);
// Recursive doubling at 2 ranks runs on the pair's own link (rd_schedule.h, "Links") for
// host buckets up to this size, on the ring's links above it and for device buckets.
constexpr size_t kPairLinkMaxBytes = size_t{16} << 10;
// Whether a pass of `algo` moving `bytes` runs on the pair's own link (ScheduleParams::pairLink).
inline bool pairLinkFor(int size, Algorithm algo, size_t bytes, bool device) {
  return size == 2 && algo == Algorithm::kRd && !device && bytes <= kPairLinkMaxBytes;
}
// The smallest segment where every link of the job reads its peers' frames (a round trip each).
constexpr size_t kPulledSegmentBytes = size_t{128} << 10;

// The algorithm of a pass of `kind` moving `bytes`. A device bucket at more than 2 ranks
// always takes the ring: recursive doubling and halving-doubling with partners run on host
// buckets only (engine/run/device_pass.h).
Algorithm algorithmFor(const JobFacts& job, Collective kind, size_t bytes, bool device);

// The plan of one pass: the algorithm and the segments of a collective of `count` elements
// of `dtype` (a barrier runs as an all-reduce).
ScheduleParams planPass(const JobFacts& job, Collective kind, rr_dtype_t dtype, size_t count, int root, bool device);

}  // namespace rr
