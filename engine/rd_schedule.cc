// Recursive doubling's units; see rd_schedule.h.
#include "engine/rd_schedule.h"

#include <algorithm>

namespace rr {

bool rdSupports(int size) { return size == 2; }

size_t rdNumUnits(const ScheduleParams& p) { return (p.count + p.segElems - 1) / p.segElems; }

Unit rdUnit(const ScheduleParams& p, size_t k) {
  const size_t begin = k * p.segElems;
  const size_t count = std::min(p.segElems, p.count - begin);
  Unit u;
  u.sendFrom = Buffer::kSend;
  u.sendOffset = begin;
  u.sendCount = count;
  u.recvInto = Buffer::kRecv;
  u.recvOffset = begin;
  u.recvCount = count;
  u.reduce = true;
  u.reduceOffset = begin;
  u.firstReduce = true;  // one exchange: each element's first and last reduction
  u.lastReduce = true;
  u.receivedFirst = p.rank == 1;  // the partner, rank 0, is the lower rank
  u.afterSend = static_cast<int64_t>(k);
  return u;
}

}  // namespace rr
