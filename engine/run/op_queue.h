// OpQueue: the collectives a rank has submitted and not yet started, in submission order.
// Submitting threads push; the progress thread takes them from the front, alone or as a
// fused group. The lock also assigns sequence numbers, so queue order is sequence order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/run/op_header.h"
#include "engine/run/request.h"

namespace rr {

class OpQueue {
 public:
  // Assigns the next sequence number and queues the request; false once closed. A quiet
  // push does not wake front(): the pusher means to run the request itself
  // (Communicator::runBlocking) and calls announce() if it does not.
  bool push(const std::shared_ptr<Request>& request, bool quiet = false);
  // Makes front() see what is queued (after a quiet push that the pusher did not run).
  void announce();
  // The front request now, without waiting; nullptr if none.
  std::shared_ptr<Request> peek() const;
  uint64_t lastSubmitted() const;
  // The front request, waiting up to `wait` for one (spinning for `spin` of it before it
  // sleeps); nullptr if none came.
  std::shared_ptr<Request> front(std::chrono::milliseconds wait, std::chrono::microseconds spin);
  // How many requests from the front may share one pass: all-reduces with the front's
  // dtype and op, queued now, at most fusionBytes in all and maxOps of them, and none that
  // reads what an earlier one of them writes (fusion must never change a result).
  size_t fusible(size_t fusionBytes, size_t maxOps) const;
  // Writes the counts of up to `max` requests from the front; returns how many it wrote.
  size_t describe(uint64_t* counts, size_t max) const;
  // How many requests from the front match the header's collectives, in order (for a
  // proposal: cut, as fusible cuts, where this rank cannot fuse).
  size_t matching(const GroupHeader& header) const;
  // The i-th request from the front's collective, if that many are queued.
  std::optional<OpDesc> descAt(size_t i) const;
  std::vector<std::shared_ptr<Request>> pop(size_t count);
  // Makes a waiting front() return now (an abort).
  void wake();
  // Refuses later pushes; what is queued stays to be run.
  void close();
  bool closed() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  uint64_t lastSeq_ = 0;
  bool closed_ = false;
  bool woken_ = false;
  // Something to look at (a request, a wake, the close): what a spinning front() polls.
  std::atomic<bool> pending_{false};
};

}  // namespace rr
