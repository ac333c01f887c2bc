// The stand-in GPU; see fake_gpu.h for the rules it keeps. One mutex guards the whole device
// (it is a test device: clarity over speed). Each stream has a worker thread while it has
// work; the thread exits when its queue is empty, so an idle process holds no thread of it.
#include "kernels/fake_gpu.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace rr::fake {

using Clock = std::chrono::steady_clock;

struct EventState {
  uint64_t recorded = 0;   // records queued
  uint64_t completed = 0;  // records that have run
};

struct Event {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

namespace {

enum class Kind { kKernel, kHostFunc, kRecord, kWaitEvent, kWaitValue, kWriteValue };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::kKernel: return "a kernel";
    case Kind::kHostFunc: return "a host function";
    case Kind::kRecord: return "an event record";
    case Kind::kWaitEvent: return "an event wait";
    case Kind::kWaitValue: return "a value wait";
    case Kind::kWriteValue: return "a value write";
  }
  return "?";
}

struct Op {
  explicit Op(Kind k, std::function<void()> f = {}, std::shared_ptr<EventState> e = {})
      : kind(k), fn(std::move(f)), event(std::move(e)) {}
  Kind kind;
  uint64_t seq = 0;  // device-wide queue order (rule 4)
  std::function<void()> fn;
  std::shared_ptr<EventState> event;
  uint64_t gen = 0;
  std::atomic<uint32_t>* addr = nullptr;
  uint32_t value = 0;
  Clock::time_point notBefore{};
};

}  // namespace

struct Stream {
  std::string name;
  bool legacy = false;
  bool nonBlocking = false;
  std::deque<Op> queue;  // the front is running or next
  std::thread worker;
  bool workerActive = false;
};

namespace {

thread_local bool inHostFunc = false;

class Gpu {
 public:
  static Gpu& get() {
    static Gpu* gpu = new Gpu();  // like a CUDA context: lives as long as the process
    return *gpu;
  }

  Stream* create(bool nonBlocking) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto s = std::make_unique<Stream>();
    s->nonBlocking = nonBlocking;
    s->name = fmt::format("stream {}{}", ++streamCount_, nonBlocking ? " (non-blocking)" : "");
    streams_.push_back(std::move(s));
    return streams_.back().get();
  }

  void destroy(Stream* s) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, syncLimit_, [&] { return s->queue.empty() && !s->workerActive; });
    if (!s->queue.empty() || s->workerActive)
      throw std::runtime_error(fmt::format("fake GPU: {} still busy with {} at its destruction",
                                           s->name, kindName(s->queue.front().kind)));
    if (s->worker.joinable()) s->worker.join();
    for (auto it = streams_.begin(); it != streams_.end(); ++it)
      if (it->get() == s) {
        streams_.erase(it);
        break;
      }
  }

  Stream* legacy() { return &legacy_; }

  void enqueue(Stream* s, Op op) {
    if (s == nullptr) s = &legacy_;
    std::unique_lock<std::mutex> lock(mutex_);
    // Rule 9: a full queue takes the next item only once one has completed.
    if (!cv_.wait_for(lock, syncLimit_, [&] { return s->queue.size() < queueDepth_; }))
      throw std::runtime_error(fmt::format(
          "fake GPU: {} holds {} items, its queue is full, and none completed for {} ms (a real "
          "GPU would wait forever): {}",
          s->name, s->queue.size(), syncLimit_.count(), stateLocked()));
    op.seq = ++seq_;
    if (op.kind == Kind::kRecord) op.gen = ++op.event->recorded;
    s->queue.push_back(std::move(op));
    if (!s->workerActive) {
      if (s->worker.joinable()) s->worker.join();  // it has left its loop
      s->workerActive = true;
      s->worker = std::thread([this, s] { work(s); });
    }
    cv_.notify_all();
  }

  void waitEvent(Stream* s, const std::shared_ptr<EventState>& e) {
    Op op(Kind::kWaitEvent, {}, e);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      op.gen = e->recorded;  // the record the event has now (rule 3)
    }
    enqueue(s, std::move(op));
  }

  bool query(const std::shared_ptr<EventState>& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    return e->completed >= e->recorded;
  }

  bool synchronize(Stream* s, std::chrono::milliseconds limit) {
    if (s == nullptr) s = &legacy_;
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return s->queue.empty(); });
  }

  bool streamIdle(Stream* s) {
    std::lock_guard<std::mutex> lock(mutex_);
    return (s == nullptr ? legacy_ : *s).queue.empty();
  }

  // Rule 5: a barrier across the device. It waits for the work queued before it on every
  // stream, and no work queued after it starts until it is over (or given up).
  void synchronizeDevice(const char* call) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t barrier = seq_;
    barriers_.insert(barrier);
    auto earlierDone = [&] {
      for (Stream* s : all())
        if (!s->queue.empty() && s->queue.front().seq <= barrier) return false;
      return true;
    };
    const bool done = cv_.wait_for(lock, syncLimit_, earlierDone);
    barriers_.erase(barriers_.find(barrier));
    cv_.notify_all();
    if (!done)
      throw std::runtime_error(fmt::format(
          "fake GPU: {} synchronises the device implicitly and waited {} ms for the streams "
          "(a real GPU would wait forever): {}",
          call, syncLimit_.count(), stateLocked()));
    // Reap the workers that have left their loops, so an idle process holds none.
    for (Stream* s : all())
      if (!s->workerActive && s->worker.joinable()) s->worker.join();
  }

  // Rule 8: a kernel not yet loaded is loaded behind an implicit synchronisation.
  void load(const std::string& kernel) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (loaded_.count(kernel) > 0) return;
    }
    synchronizeDevice(fmt::format("loading kernel '{}' at its first launch (lazy loading)", kernel).c_str());
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_.insert(kernel);
  }

  std::string state() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stateLocked();
  }

  void setSyncLimit(std::chrono::milliseconds limit) {
    std::lock_guard<std::mutex> lock(mutex_);
    syncLimit_ = limit;
  }

  void setQueueDepth(size_t depth) {
    std::lock_guard<std::mutex> lock(mutex_);
    queueDepth_ = depth > 0 ? depth : kQueueDepth;
  }

 private:
  std::vector<Stream*> all() {
    std::vector<Stream*> out{&legacy_};
    for (const auto& s : streams_) out.push_back(s.get());
    return out;
  }

  std::string stateLocked() {
    std::string out;
    for (Stream* s : all()) {
      if (s->queue.empty()) continue;
      out += fmt::format("{}{}: {} item(s) queued, the first {}", out.empty() ? "" : "; ", s->name,
                         s->queue.size(), kindName(s->queue.front().kind));
    }
    if (hostFuncs_ > 0) out += fmt::format("; {} host function(s) running", hostFuncs_);
    return out.empty() ? "every stream idle" : out;
  }

  // Rule 4: the legacy stream and the blocking streams wait for each other's earlier work.
  bool orderedBehind(const Stream* s, uint64_t seq) const {
    if (s->nonBlocking) return false;
    if (s->legacy) {
      for (const auto& other : streams_)
        if (!other->nonBlocking && !other->queue.empty() && other->queue.front().seq < seq) return true;
      return false;
    }
    return !legacy_.queue.empty() && legacy_.queue.front().seq < seq;
  }

  // Whether the stream's front item may start now; if not, until when to sleep at most.
  bool ready(const Stream* s, const Op& op, Clock::time_point& wakeAt) const {
    const auto now = Clock::now();
    wakeAt = now + std::chrono::milliseconds(1);
    if (hostFuncs_ > 0 || orderedBehind(s, op.seq)) return false;  // rules 2 and 4
    if (!barriers_.empty() && *barriers_.begin() < op.seq) return false;  // rule 5
    switch (op.kind) {
      case Kind::kKernel:
        if (now < op.notBefore) {
          wakeAt = op.notBefore;
          return false;
        }
        return true;
      case Kind::kWaitEvent:
        return op.event->completed >= op.gen;
      case Kind::kWaitValue:
        wakeAt = now + std::chrono::microseconds(50);  // the host writes without a notify
        return static_cast<int32_t>(op.addr->load(std::memory_order_acquire) - op.value) >= 0;
      default:
        return true;
    }
  }

  void work(Stream* s) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (s->queue.empty()) {
        s->workerActive = false;
        cv_.notify_all();
        return;
      }
      Op& op = s->queue.front();
      Clock::time_point wakeAt;
      if (!ready(s, op, wakeAt)) {
        cv_.wait_until(lock, wakeAt);
        continue;
      }
      if (op.kind == Kind::kRecord) {
        op.event->completed = std::max(op.event->completed, op.gen);
      } else if (op.kind == Kind::kWriteValue) {
        op.addr->store(op.value, std::memory_order_release);  // after the work before it
      } else if (op.kind == Kind::kKernel || op.kind == Kind::kHostFunc) {
        const bool host = op.kind == Kind::kHostFunc;
        hostFuncs_ += host ? 1 : 0;
        std::function<void()> fn = std::move(op.fn);
        lock.unlock();
        inHostFunc = host;
        fn();
        inHostFunc = false;
        lock.lock();
        hostFuncs_ -= host ? 1 : 0;
      }
      s->queue.pop_front();
      cv_.notify_all();
    }
  }

  Gpu() {
    legacy_.legacy = true;
    legacy_.name = "stream NULL (legacy default)";
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  Stream legacy_;
  std::vector<std::unique_ptr<Stream>> streams_;
  uint64_t seq_ = 0;
  int streamCount_ = 0;
  int hostFuncs_ = 0;
  std::set<std::string> loaded_;   // kernels loaded (rule 8)
  std::multiset<uint64_t> barriers_;  // implicit synchronisations in progress (rule 5)
  std::chrono::milliseconds syncLimit_ = kSyncLimit;
  size_t queueDepth_ = kQueueDepth;  // rule 9
};

// Rule 7: a host function may not call CUDA.
void noCallFromHostFunc(const char* call) {
  if (inHostFunc)
    throw std::logic_error(fmt::format("fake GPU: {} called from a host function (CUDA forbids "
                                       "CUDA calls there)", call));
}

}  // namespace

Stream* createStream(bool nonBlocking) {
  noCallFromHostFunc("cudaStreamCreate");
  return Gpu::get().create(nonBlocking);
}

void destroyStream(Stream* stream) {
  noCallFromHostFunc("cudaStreamDestroy");
  if (stream != nullptr) Gpu::get().destroy(stream);
}

Stream* legacyStream() { return Gpu::get().legacy(); }

void loadKernel(const std::string& kernel) {
  noCallFromHostFunc("cudaFuncGetAttributes");
  Gpu::get().load(kernel);
}

void launch(Stream* stream, const std::string& kernel, std::function<void()> work) {
  noCallFromHostFunc("a kernel launch");
  Gpu::get().load(kernel);
  Op op(Kind::kKernel, std::move(work));
  op.notBefore = Clock::now() + kLatency;
  Gpu::get().enqueue(stream, std::move(op));
}

void launchHostFunc(Stream* stream, std::function<void()> fn) {
  noCallFromHostFunc("cudaLaunchHostFunc");
  Gpu::get().enqueue(stream, Op(Kind::kHostFunc, std::move(fn)));
}

Event* createEvent() {
  noCallFromHostFunc("cudaEventCreate");
  return new Event();
}

void destroyEvent(Event* event) { delete event; }  // a pending record keeps its state alive

void recordEvent(Event* event, Stream* stream) {
  noCallFromHostFunc("cudaEventRecord");
  Gpu::get().enqueue(stream, Op(Kind::kRecord, {}, event->state));
}

void streamWaitEvent(Stream* stream, Event* event) {
  noCallFromHostFunc("cudaStreamWaitEvent");
  Gpu::get().waitEvent(stream, event->state);
}

bool eventQuery(Event* event) {
  noCallFromHostFunc("cudaEventQuery");
  return Gpu::get().query(event->state);
}

void streamWaitValue(Stream* stream, const std::atomic<uint32_t>* addr, uint32_t value) {
  noCallFromHostFunc("cuStreamWaitValue32");
  Op op(Kind::kWaitValue);
  op.addr = const_cast<std::atomic<uint32_t>*>(addr);  // only read
  op.value = value;
  Gpu::get().enqueue(stream, std::move(op));
}

void streamWriteValue(Stream* stream, std::atomic<uint32_t>* addr, uint32_t value) {
  noCallFromHostFunc("cuStreamWriteValue32");
  Op op(Kind::kWriteValue);
  op.addr = addr;
  op.value = value;
  Gpu::get().enqueue(stream, std::move(op));
}

bool streamQuery(Stream* stream) {
  noCallFromHostFunc("cudaStreamQuery");
  return Gpu::get().streamIdle(stream);
}

bool streamSynchronize(Stream* stream, std::chrono::milliseconds limit) {
  noCallFromHostFunc("cudaStreamSynchronize");
  return Gpu::get().synchronize(stream, limit);
}

void synchronizeDevice(const char* call) {
  noCallFromHostFunc(call);
  Gpu::get().synchronizeDevice(call);
}

std::string describeState() { return Gpu::get().state(); }

void setSyncLimitForTests(std::chrono::milliseconds limit) { Gpu::get().setSyncLimit(limit); }

void setQueueDepthForTests(size_t depth) { Gpu::get().setQueueDepth(depth); }

}  // namespace rr::fake
