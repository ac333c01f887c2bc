// Request: one submitted collective, shared by the caller (through rr_request_t) and the
// progress thread. Its fields are written before it is queued, its result once by the
// progress thread; `done` publishes the result (release/acquire).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/plan/schedule.h"
#include "ringreduce/ringreduce.h"
#include "base/clock.h"

namespace rr {

struct OpDesc {
  uint64_t seq = 0;
  Collective kind = Collective::kAllReduce;
  rr_dtype_t dtype = RR_FLOAT32;
  rr_op_t op = RR_SUM;
  int root = 0;
  uint64_t count = 0;
};

class StreamOrder;

struct Request {
  OpDesc desc;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;  // bytes of the bucket (all-reduce, broadcast) or of one block
  Clock::time_point submitted;
  int device = -1;             // the GPU holding both buffers, -1: host memory
  // Ordered on the caller's stream (stream_order.h): the start event recorded there (taken
  // by the pass), and the number whose release lets the caller's stream go on.
  StreamOrder* order = nullptr;
  void* startEvent = nullptr;
  uint64_t orderNumber = 0;
  // A device bucket's work, queued at submission (engine/run/device_pass.h): its flag values
  // run from programBase + 1 to programEnd (programEnd == programBase: none).
  uint32_t programBase = 0;
  uint32_t programEnd = 0;
  // A device bucket on more than one rank: the schedule chosen once at submission, which
  // its queued device work follows and its pass runs (they must agree unit for unit).
  ScheduleParams deviceSchedule{};

  // Fusion packs host buffers with memcpy before the pass: only host buckets that wait for
  // no stream can share a pass.
  bool fusible() const { return device < 0 && order == nullptr; }

  std::chrono::microseconds spin{0};  // rr_wait looks this long before it sleeps (RR_SPIN_US)

  std::atomic<bool> done{false};
  Clock::time_point completedAt{};                 // set by complete() before `done`
  std::atomic<Clock::time_point> wokeAt{Clock::time_point{}};  // a caller first saw `done`
  rr_result_t result = RR_SUCCESS;
  std::string error;

  // Publishes the result once; a stream held for this request is released first (the
  // communicator, and with it the StreamOrder, may be destroyed once `done` is seen).
  void complete(rr_result_t code, std::string message);
  rr_result_t wait();
  // The first time a caller sees the result (rr_wait, rr_test): for RR_PHASES.
  void noteWoke();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace rr
