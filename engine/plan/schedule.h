// Schedule: the plan of one collective, as pure data. No sockets, no arithmetic on
// elements; the ProgressEngine executes it and the tests compare it with the closed form.
//
//   rank r, size n, right = (r+1)%n, left = (r-1+n)%n; the bucket is n blocks, one per rank
//
//        +----+  send  +----+  send  +----+
//    ... | r-1| -----> |  r | -----> | r+1| ...     every rank sends only to its right and
//        +----+        +----+        +----+          receives only from its left
//
//   all-reduce     = reduce-scatter (steps s = 0..n-2) then all-gather (steps s = 0..n-2)
//     reduce-scatter: send block (r-s)%n,   recv block (r-s-1)%n and reduce it into recv
//     all-gather:     send block (r+1-s)%n, recv block (r-s)%n straight into recv
//   reduce_scatter = reduce-scatter shifted by one block so that rank r ends with block r;
//                    partial sums live in staging slots, only block r is written to recv
//   allgather      = all-gather starting from the rank's own block
//   broadcast      = a pipelined chain root -> root+1 -> ... -> root-1
//   all-reduce by recursive doubling (params.algo = kRd): the units of rd_schedule.h
//   all-reduce by halving-doubling (params.algo = kHd): the units of hd_schedule.h
//
// Cost of all-reduce: 2(n-1) latencies and 2(n-1)/n * S bytes sent per rank, the bandwidth
// lower bound. To pipeline, each block is cut into rounds of `depth` segments; a transfer
// unit is one segment of one step, numbered k = (round * steps + step) * depth + segment.
// Both ends of a link walk the same unit numbers, so a unit never needs an id on the wire.
// A unit's send waits for the receive of unit k - depth (the same segment one step
// earlier), so `depth` segments are in flight per link.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rr {

// kBarrier is its own kind in op headers (a barrier never matches an all-reduce); it runs as
// an all-reduce of one uint8 per rank (MAX), so no schedule is ever made for it.
enum class Collective : uint8_t { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kBarrier };

const char* collectiveName(Collective kind);

// How an all-reduce moves its bytes: around the ring (2(n-1) hops, the bandwidth bound), or
// by recursive doubling (rd_schedule.h: log2 n exchanges, for small buckets), or by
// halving-doubling (hd_schedule.h: the ring's bytes in 2 log2 n exchanges, for mid-size
// buckets at n > 2). Chosen per pass (algorithm.h) and carried in the op
// header, so that every rank runs the same one or the mismatch is named.
enum class Algorithm : uint8_t { kRing, kRd, kHd };

// Segments in flight per link: a pass's pipeline depth (ScheduleParams::depth).
constexpr int kSegmentsInFlight = 4;

const char* algorithmName(Algorithm algo);

// Where the bytes of one side of a unit are. Offsets into kSend and kRecv are element
// offsets into the user's buffer; for kStage the offset is the unit number whose partial
// result the staging slot holds (the engine maps it to a slot).
enum class Buffer : uint8_t { kNone, kSend, kRecv, kStage };

struct Unit {
  Buffer sendFrom = Buffer::kNone;  // kNone: nothing to send in this unit
  size_t sendOffset = 0;
  size_t sendCount = 0;

  Buffer recvInto = Buffer::kNone;  // kNone: nothing to receive in this unit
  size_t recvOffset = 0;
  size_t recvCount = 0;
  bool reduce = false;         // recvInto = local operand op received (else: a copy)
  Buffer reduceFrom = Buffer::kSend;  // the local operand: kSend, this rank's raw input
                                      // (float RR_AVG scales it), or kRecv, a partial result
  size_t reduceOffset = 0;     // element offset of the local operand in reduceFrom
  bool firstReduce = false;    // the received segment is one rank's raw input (float
                               // RR_AVG scales it): its first reduction
  bool lastReduce = false;     // the last reduction of these elements (integer RR_AVG divides here)
  bool receivedFirst = false;  // the received segment is the first operand (it comes from a
                               // lower rank: every rank then reduces in rank order)
  int64_t afterSend = -1;      // the reduction may write only once this unit's send has read
                               // its bytes (it overwrites them when the call is in place)

  int64_t dependsOn = -1;      // the send waits until the receive of this unit is done
  int peer = -1;               // -1: send to the right neighbour, receive from the left;
                               // else the one rank this unit sends to and receives from
                               // over its own link (recursive doubling at n > 2, or on
                               // the pair's link at n = 2)
};

struct ScheduleParams {
  Collective kind = Collective::kAllReduce;
  int rank = 0;
  int size = 1;
  size_t count = 0;      // all-reduce, broadcast: whole bucket; allgather, reduce_scatter: per rank
  size_t segElems = 1;   // elements per segment (> 0)
  int depth = 2;         // segments per round per block (> 0)
  int root = 0;          // broadcast only
  Algorithm algo = Algorithm::kRing;  // all-reduce only; kRd: rd_schedule.h, kHd: hd_schedule.h
  bool pairLink = false;  // kRd at n = 2: the exchange on the pair's own link, not the ring's
                          // two (rd_schedule.h, "Links")
};

class Schedule {
 public:
  explicit Schedule(const ScheduleParams& params);

  size_t numUnits() const { return numUnits_; }
  int depth() const { return params_.depth; }
  Unit unit(size_t k) const;

  // Units [0, reduceEnd()) hold every reduction: once they are received, only all-gather
  // work is left. 0 for allgather and broadcast.
  size_t reduceEnd() const;
  // Number of ring steps per round (2(n-1) for all-reduce, n-1 for the halves; 1 for
  // recursive doubling and halving-doubling, whose steps are their own files).
  int steps() const { return steps_; }
  // Whether units send to and receive from partners other than the ring's neighbours.
  bool usesPartners() const {
    return params_.algo != Algorithm::kRing && (params_.size > 2 || params_.pairLink);
  }
  Algorithm algo() const { return params_.algo; }
  // Chunk bounds, computed here only: [begin, end) of block `block` in element offsets of
  // the full n-block layout.
  size_t blockBegin(int block) const;
  size_t blockSize(int block) const;

 private:
  Unit ringUnit(size_t round, int step, size_t seg) const;
  Unit broadcastUnit(size_t k) const;
  int mod(int64_t x) const;

  ScheduleParams params_;
  int steps_ = 0;
  size_t rounds_ = 0;
  size_t numUnits_ = 0;
};

// Splits `total` into `parts` nearly equal pieces: piece i begins at partBegin and the
// first total % parts pieces are one larger. The one place that cuts ranges.
size_t partBegin(size_t total, size_t parts, size_t i);
size_t partSize(size_t total, size_t parts, size_t i);

}  // namespace rr
