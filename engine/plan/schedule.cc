// The ring schedule, implemented as the closed form of schedule.h, unit by unit.
#include "engine/plan/schedule.h"

#include <algorithm>

#include "engine/plan/hd_schedule.h"
#include "engine/plan/rd_schedule.h"
#include "base/error.h"

namespace rr {

const char* collectiveName(Collective kind) {
  switch (kind) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown";
}

const char* algorithmName(Algorithm algo) {
  return algo == Algorithm::kRd ? "rd" : algo == Algorithm::kHd ? "hd" : "ring";
}

size_t partBegin(size_t total, size_t parts, size_t i) {
  return i * (total / parts) + std::min(i, total % parts);
}

size_t partSize(size_t total, size_t parts, size_t i) {
  return total / parts + (i < total % parts ? 1 : 0);
}

Schedule::Schedule(const ScheduleParams& params) : params_(params) {
  const int n = params_.size;
  if (params_.kind == Collective::kBroadcast) {
    steps_ = 1;
    numUnits_ = n > 1 ? (params_.count + params_.segElems - 1) / params_.segElems : 0;
    return;
  }
  if (params_.algo != Algorithm::kRing) {  // recursive doubling or halving-doubling: their own units
    const bool rd = params_.algo == Algorithm::kRd;
    if (params_.kind != Collective::kAllReduce || !(rd ? rdSupports(n) : hdSupports(n)))
      fail(RR_ERR_INTERNAL, "{} planned for a {} of {} ranks", rd ? "recursive doubling" : "halving-doubling",
           collectiveName(params_.kind), n);
    steps_ = 1;
    numUnits_ = rd ? rdNumUnits(params_) : hdNumUnits(params_);
    return;
  }
  steps_ = params_.kind == Collective::kAllReduce ? 2 * (n - 1) : n - 1;
  const size_t roundElems = params_.segElems * static_cast<size_t>(params_.depth);
  rounds_ = (blockSize(0) + roundElems - 1) / roundElems;  // block 0 is the largest
  numUnits_ = rounds_ * static_cast<size_t>(steps_) * static_cast<size_t>(params_.depth);
}

size_t Schedule::reduceEnd() const {
  if (params_.kind == Collective::kReduceScatter || params_.algo != Algorithm::kRing) return numUnits_;
  if (params_.kind != Collective::kAllReduce || rounds_ == 0) return 0;
  const size_t depth = static_cast<size_t>(params_.depth);
  return ((rounds_ - 1) * static_cast<size_t>(steps_) + static_cast<size_t>(params_.size - 1)) * depth;
}

int Schedule::mod(int64_t x) const {
  const int64_t n = params_.size;
  return static_cast<int>(((x % n) + n) % n);
}

size_t Schedule::blockBegin(int block) const {
  if (params_.kind == Collective::kAllReduce || params_.kind == Collective::kBroadcast)
    return partBegin(params_.count, static_cast<size_t>(params_.size), static_cast<size_t>(block));
  return static_cast<size_t>(block) * params_.count;
}

size_t Schedule::blockSize(int block) const {
  if (params_.kind == Collective::kAllReduce || params_.kind == Collective::kBroadcast)
    return partSize(params_.count, static_cast<size_t>(params_.size), static_cast<size_t>(block));
  return params_.count;
}

Unit Schedule::unit(size_t k) const {
  if (params_.kind == Collective::kBroadcast) return broadcastUnit(k);
  if (params_.algo == Algorithm::kRd) return rdUnit(params_, k);
  if (params_.algo == Algorithm::kHd) return hdUnit(params_, k);
  const size_t depth = static_cast<size_t>(params_.depth);
  const size_t perRound = static_cast<size_t>(steps_) * depth;
  return ringUnit(k / perRound, static_cast<int>((k % perRound) / depth), k % depth);
}

Unit Schedule::broadcastUnit(size_t k) const {
  const int n = params_.size;
  const int pos = mod(params_.rank - params_.root);  // position in the chain, root = 0
  const size_t begin = k * params_.segElems;
  const size_t count = std::min(params_.segElems, params_.count - begin);
  Unit u;
  if (pos < n - 1) {
    u.sendFrom = Buffer::kRecv;
    u.sendOffset = begin;
    u.sendCount = count;
    u.dependsOn = pos > 0 ? static_cast<int64_t>(k) : -1;
  }
  if (pos > 0) {
    u.recvInto = Buffer::kRecv;
    u.recvOffset = begin;
    u.recvCount = count;
  }
  return u;
}

Unit Schedule::ringUnit(size_t round, int step, size_t seg) const {
  const int n = params_.size;
  const int r = params_.rank;
  const size_t k = (round * static_cast<size_t>(steps_) + static_cast<size_t>(step)) *
                       static_cast<size_t>(params_.depth) + seg;
  // The elements of segment `seg` in round `round` of a block, clipped to the block.
  const size_t within = (round * static_cast<size_t>(params_.depth) + seg) * params_.segElems;
  auto segCount = [&](int block) {
    const size_t size = blockSize(block);
    return within >= size ? size_t{0} : std::min(params_.segElems, size - within);
  };

  int sendBlock = 0;
  int recvBlock = 0;
  bool gather = false;  // an all-gather step: the received segment is final, copy it
  switch (params_.kind) {
    case Collective::kAllReduce:
      gather = step >= n - 1;
      sendBlock = gather ? mod(r + 1 - (step - (n - 1))) : mod(r - step);
      recvBlock = gather ? mod(r - (step - (n - 1))) : mod(r - step - 1);
      break;
    case Collective::kReduceScatter:
      sendBlock = mod(r - 1 - step);
      recvBlock = mod(r - 2 - step);
      break;
    case Collective::kAllGather:
      gather = true;
      sendBlock = mod(r - step);
      recvBlock = mod(r - step - 1);
      break;
    case Collective::kBroadcast:
    case Collective::kBarrier: break;
  }

  Unit u;
  u.dependsOn = step > 0 ? static_cast<int64_t>(k - static_cast<size_t>(params_.depth)) : -1;
  u.sendCount = segCount(sendBlock);
  if (u.sendCount > 0) {
    u.sendOffset = blockBegin(sendBlock) + within;
    u.sendFrom = step == 0 ? Buffer::kSend : Buffer::kRecv;
    if (params_.kind == Collective::kAllGather && step == 0) u.sendOffset = within;
    if (params_.kind == Collective::kReduceScatter && step > 0) {
      u.sendFrom = Buffer::kStage;
      u.sendOffset = k - static_cast<size_t>(params_.depth);
    }
  }
  u.recvCount = segCount(recvBlock);
  if (u.recvCount > 0) {
    u.recvInto = Buffer::kRecv;
    u.recvOffset = blockBegin(recvBlock) + within;
    if (!gather) {
      u.reduce = true;
      u.reduceOffset = blockBegin(recvBlock) + within;
      u.firstReduce = step == 0;
      u.lastReduce = step == n - 2;
      if (params_.kind == Collective::kReduceScatter) {
        u.recvInto = u.lastReduce ? Buffer::kRecv : Buffer::kStage;
        u.recvOffset = u.lastReduce ? within : k;
      }
    }
  }
  return u;
}

}  // namespace rr
