// Request: one submitted collective, shared by the caller (through rr_request_t) and the
// progress thread. Its fields are written before it is queued, its result once by the
// progress thread; `done` publishes the result (release/acquire).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/ring_schedule.h"
#include "ringreduce/ringreduce.h"
#include "transport/socket.h"

namespace rr {

struct OpDesc {
  uint64_t seq = 0;
  Collective kind = Collective::kAllReduce;
  rr_dtype_t dtype = RR_FLOAT32;
  rr_op_t op = RR_SUM;
  int root = 0;
  uint64_t count = 0;
};

struct Request {
  OpDesc desc;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;  // bytes of the bucket (all-reduce, broadcast) or of one block
  Clock::time_point submitted;
  int device = -1;             // the GPU holding both buffers, -1: host memory
  void* startEvent = nullptr;  // recorded on the caller's stream at submission; the pass
                               // starts after it (taken by the progress thread)

  ~Request();
  // Fusion packs host buffers with memcpy before the pass: only host buckets that wait for
  // no stream can share a pass.
  bool fusible() const { return device < 0 && startEvent == nullptr; }

  std::atomic<bool> done{false};
  rr_result_t result = RR_SUCCESS;
  std::string error;

  void complete(rr_result_t code, std::string message);
  rr_result_t wait();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace rr
