// OpQueue; see op_queue.h.
#include "engine/run/op_queue.h"

#include "engine/run/spin.h"

namespace rr {
namespace {

// Whether request n of `q` reads memory that an earlier request of the group writes: fusion
// copies every member's input before the pass, so such a request must start a new group.
bool readsEarlierOutput(const std::deque<std::shared_ptr<Request>>& q, size_t n) {
  const auto* in = static_cast<const uint8_t*>(q[n]->send);
  for (size_t m = 0; m < n; ++m) {
    const auto* out = static_cast<const uint8_t*>(q[m]->recv);
    if (in < out + q[m]->bytes && out < in + q[n]->bytes) return true;
  }
  return false;
}

}  // namespace

bool OpQueue::push(const std::shared_ptr<Request>& request, bool quiet) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return false;
    request->desc.seq = ++lastSeq_;
    queue_.push_back(request);
    if (quiet) return true;
    pending_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
  return true;
}

std::shared_ptr<Request> OpQueue::peek() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() ? nullptr : queue_.front();
}

void OpQueue::announce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return;
    pending_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
}

uint64_t OpQueue::lastSubmitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lastSeq_;
}

std::shared_ptr<Request> OpQueue::front(std::chrono::milliseconds wait, std::chrono::microseconds spin) {
  spinUntil([&] { return pending_.load(std::memory_order_acquire); }, spin);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, wait, [&] { return !queue_.empty() || closed_ || woken_; });
  woken_ = false;
  pending_.store(!queue_.empty() || closed_, std::memory_order_release);
  return queue_.empty() ? nullptr : queue_.front();
}

size_t OpQueue::fusible(size_t fusionBytes, size_t maxOps) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return 0;
  const OpDesc& first = queue_.front()->desc;
  if (first.kind != Collective::kAllReduce || queue_.front()->bytes > fusionBytes ||
      !queue_.front()->fusible())
    return 1;
  size_t total = 0, n = 0;
  for (const auto& r : queue_) {
    if (n == maxOps || !r->fusible() || r->desc.kind != Collective::kAllReduce || r->desc.dtype != first.dtype ||
        r->desc.op != first.op || total + r->bytes > fusionBytes || readsEarlierOutput(queue_, n))
      break;
    total += r->bytes;
    ++n;
  }
  return std::max<size_t>(n, 1);
}

size_t OpQueue::matching(const GroupHeader& header) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (; n < header.numOps && n < queue_.size() && sameOp(queue_[n]->desc, header.opAt(n)); ++n) {
    // A pass of several ops packs host buffers: an op that cannot be packed (a device
    // bucket, one ordered on a stream) runs alone, so a proposal is cut before it, or to it.
    if (header.numOps > 1 && (!queue_[n]->fusible() || readsEarlierOutput(queue_, n))) {
      if (n == 0) n = 1;
      break;
    }
  }
  return n;
}

std::optional<OpDesc> OpQueue::descAt(size_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (i >= queue_.size()) return std::nullopt;
  return queue_[i]->desc;
}

std::vector<std::shared_ptr<Request>> OpQueue::pop(size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Request>> out;
  for (size_t i = 0; i < count && !queue_.empty(); ++i) {
    out.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  pending_.store(!queue_.empty(), std::memory_order_release);
  return out;
}

void OpQueue::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
    pending_.store(true, std::memory_order_release);  // ends a spinning front() too
  }
  cv_.notify_all();
}

void OpQueue::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    pending_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool OpQueue::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

size_t OpQueue::describe(uint64_t* counts, size_t max) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (; n < max && n < queue_.size(); ++n) counts[n] = queue_[n]->desc.count;
  return n;
}

}  // namespace rr
