// The C API: the only extern "C" definitions. Each call validates what it can, runs inside
// a guard that catches every exception and maps it to a result code, and keeps the message
// for rr_last_error on this thread. No exception crosses this boundary.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/communicator.h"
#include "engine/run/request.h"
#include "kernels/device.h"
#include "ringreduce/ringreduce.h"
#include "base/error.h"

// A handle remembers the process that made it: after fork() the child holds a copy of the
// communicator whose threads, locks, sockets and UCX state belong to the parent, so every
// call from another process is refused, and a destroy there touches none of it
// (docs/reliability.md, "fork").
namespace {
// This process's id. getpid() is a system call, and every call of the API compares it with a
// handle's creator: the fork handler (below) sets it in the child instead.
std::atomic<pid_t>& thisProcess() {
  static std::atomic<pid_t> pid{::getpid()};
  return pid;
}
}  // namespace

struct rr_comm {
  std::unique_ptr<rr::Communicator> impl;
  pid_t creator = thisProcess().load(std::memory_order_relaxed);
};

struct rr_request {
  std::shared_ptr<rr::Request> impl;
  pid_t creator = thisProcess().load(std::memory_order_relaxed);
};

namespace {

thread_local std::string lastError;

// The live handles of each kind: a destroyed or made-up handle is recognised (an error that
// says so) instead of being used. One lock and one hash lookup per call.
template <class Handle>
class Registry {
 public:
  // fork() while another thread holds the lock would leave the child's copy locked for
  // ever: the lock is held across fork (pthread_atfork below).
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }
  void add(Handle h) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(h);
  }
  bool remove(Handle h) {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.erase(h) == 1;
  }
  bool contains(Handle h) {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(h) == 1;
  }
  // A copy of the handle's request, taken under the lock (requests are shared).
  template <class F>
  auto with(Handle h, F f) -> decltype(f(h)) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_.count(h) == 0) return {};
    return f(h);
  }

 private:
  std::mutex mutex_;
  std::unordered_set<Handle> live_;
};

Registry<rr_comm_t>& comms() {
  static auto* r = new Registry<rr_comm_t>();  // never destroyed: handles outlive statics
  return *r;
}
Registry<rr_request_t>& requests() {
  static auto* r = new Registry<rr_request_t>();
  return *r;
}

// Handles a forked child let go of: never freed (their parts are the parent's), kept
// reachable so that a leak checker does not count them.
void orphan(void* handle) {
  static auto* mutex = new std::mutex();
  static auto* kept = new std::vector<void*>();
  std::lock_guard<std::mutex> lock(*mutex);
  kept->push_back(handle);
}

[[maybe_unused]] const bool atForkInstalled = [] {
  ::pthread_atfork(
      [] {
        comms().lockForFork();
        requests().lockForFork();
      },
      [] {
        requests().unlockAfterFork();
        comms().unlockAfterFork();
      },
      [] {
        thisProcess().store(::getpid());
        requests().unlockAfterFork();
        comms().unlockAfterFork();
      });
  return true;
}();

template <class Handle>
void checkProcess(Handle h, const char* call, const char* what) {
  if (h->creator != thisProcess().load(std::memory_order_relaxed))
    rr::fail(RR_ERR_INVALID_ARGUMENT,
             "{}: {} created by process {} used in a forked child (process {}): a child cannot use its "
             "parent's communicators or requests; create a communicator of its own",
             call, what, h->creator, thisProcess().load());
}

template <class F>
rr_result_t guarded(F&& body) {
  try {
    body();
    return RR_SUCCESS;
  } catch (const rr::Error& e) {
    lastError = e.what();
    return e.code();
  } catch (const rr::DeviceError& e) {
    lastError = e.what();
    return RR_ERR_CUDA;
  } catch (const std::bad_alloc&) {
    lastError = "out of memory";
    return RR_ERR_SYSTEM;
  } catch (const std::exception& e) {
    lastError = std::string("internal error: ") + e.what();
    return RR_ERR_INTERNAL;
  } catch (...) {
    lastError = "internal error: unknown exception";
    return RR_ERR_INTERNAL;
  }
}

rr::Communicator& commOf(rr_comm_t comm, const char* call) {
  if (comm == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: comm is NULL", call);
  if (!comms().contains(comm))
    rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: comm {} is not a live communicator (destroyed already?)",
             call, static_cast<const void*>(comm));
  checkProcess(comm, call, "communicator");
  return *comm->impl;
}

std::shared_ptr<rr::Request> requestOf(rr_request_t req, const char* call) {
  if (req == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: req is NULL", call);
  pid_t creator = 0;
  auto r = requests().with(req, [&creator](rr_request_t h) {
    creator = h->creator;
    return h->impl;
  });
  if (!r)
    rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: req {} is not a live request (freed already?)", call,
             static_cast<const void*>(req));
  if (creator != thisProcess().load(std::memory_order_relaxed))
    rr::fail(RR_ERR_INVALID_ARGUMENT,
             "{}: request created by process {} used in a forked child (process {}): a child cannot use its "
             "parent's communicators or requests",
             call, creator, thisProcess().load());
  return r;
}

// The caller's rr_config_t, read only as far as its struct_size covers: fields it does not
// have keep RR_CONFIG_INIT's values, so a program built against an older header works.
rr_config_t configOf(const rr_config_t* given) {
  rr_config_t c = RR_CONFIG_INIT;
  if (given->struct_size < offsetof(rr_config_t, rank) + sizeof(int))
    rr::fail(RR_ERR_INVALID_ARGUMENT,
             "rr_config_t.struct_size {} is too small (at least {}); start from RR_CONFIG_INIT",
             given->struct_size, offsetof(rr_config_t, rank) + sizeof(int));
  auto take = [&](auto& field) {
    const size_t offset = reinterpret_cast<const char*>(&field) - reinterpret_cast<const char*>(&c);
    if (offset + sizeof field <= given->struct_size)
      std::memcpy(&field, reinterpret_cast<const char*>(given) + offset, sizeof field);
  };
  take(c.rank);
  take(c.size);
  take(c.addr);
  take(c.secret);
  take(c.timeout_ms);
  take(c.ifname);
  return c;
}

// A C caller may pass any int as an enum; loading an out-of-range value as the C++ enum type
// is undefined, so the values are checked as raw bytes before anything reads them as enums.
template <class Enum>
int rawValue(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "the C enums are int-sized");
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Waits for a submitted collective and turns its result into this call's result.
void waitFor(const std::shared_ptr<rr::Request>& request) {
  if (rr_result_t rc = request->wait(); rc != RR_SUCCESS) throw rr::Error(rc, request->error);
}

// Hands a submitted collective to the caller as a request handle.
void handOut(std::shared_ptr<rr::Request> request, rr_request_t* req, const char* call) {
  if (req == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: req is NULL", call);
  *req = new rr_request{std::move(request)};
  requests().add(*req);
}

void checkReqOut(rr_request_t* req, const char* call) {
  if (req == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: req is NULL", call);
  *req = nullptr;
}

}  // namespace

extern "C" {

const char* rr_result_string(rr_result_t result) {
  switch (result) {
    case RR_SUCCESS: return "success";
    case RR_ERR_INVALID_ARGUMENT: return "invalid argument";
    case RR_ERR_MISMATCH: return "ranks called mismatched collectives";
    case RR_ERR_TIMEOUT: return "timed out";
    case RR_ERR_PEER_LOST: return "peer lost";
    case RR_ERR_AUTH: return "authentication failed";
    case RR_ERR_ABORTED: return "aborted";
    case RR_ERR_SYSTEM: return "system error";
    case RR_ERR_CUDA: return "CUDA error";
    case RR_ERR_UNSUPPORTED: return "unsupported";
    case RR_ERR_INTERNAL: return "internal error";
    case RR_IN_PROGRESS: return "in progress";
  }
  return "unknown result code";
}

const char* rr_last_error(void) { return lastError.c_str(); }

int rr_version(void) { return RR_VERSION_CODE; }

rr_result_t rr_comm_init(const rr_config_t* config, rr_comm_t* comm) {
  return guarded([&] {
    if (comm == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_init: comm is NULL");
    *comm = nullptr;
    if (config == nullptr)
      rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_init: config is NULL (use rr_comm_init_from_env)");
    const rr_config_t known = configOf(config);
    auto handle = std::make_unique<rr_comm>();
    handle->impl = rr::Communicator::create(&known);
    *comm = handle.release();
    comms().add(*comm);
  });
}

rr_result_t rr_comm_init_from_env(rr_comm_t* comm) {
  return guarded([&] {
    if (comm == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_init_from_env: comm is NULL");
    *comm = nullptr;
    auto handle = std::make_unique<rr_comm>();
    handle->impl = rr::Communicator::create(nullptr);
    *comm = handle.release();
    comms().add(*comm);
  });
}

rr_result_t rr_comm_destroy(rr_comm_t comm) {
  return guarded([&] {
    if (comm == nullptr) return;
    if (!comms().remove(comm))
      rr::fail(RR_ERR_INVALID_ARGUMENT,
               "rr_comm_destroy: comm {} is not a live communicator (destroyed already?)",
               static_cast<const void*>(comm));
    if (comm->creator != thisProcess().load(std::memory_order_relaxed)) {
      // A forked child's copy: its threads, locks, sockets and UCX state are the parent's.
      // The handle is let go of and nothing else is touched (or freed).
      orphan(comm);
      return;
    }
    delete comm;
  });
}

rr_result_t rr_comm_rank(rr_comm_t comm, int* rank) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_comm_rank");
    if (rank == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_rank: rank is NULL");
    *rank = c.rank();
  });
}

rr_result_t rr_comm_size(rr_comm_t comm, int* size) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_comm_size");
    if (size == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_size: size is NULL");
    *size = c.size();
  });
}

rr_result_t rr_allreduce(rr_comm_t comm, const void* send, void* recv, size_t count,
                         rr_dtype_t dtype, rr_op_t op, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_allreduce");
    rr::checkDtypeOp(rawValue(dtype), rawValue(op), true);
    waitFor(c.runBlocking([&](bool quiet) {
      return c.submit(rr::Collective::kAllReduce, send, recv, count, dtype, op, 0, stream, quiet);
    }));
  });
}

rr_result_t rr_broadcast(rr_comm_t comm, void* buf, size_t count, rr_dtype_t dtype, int root,
                         void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_broadcast");
    rr::checkDtypeOp(rawValue(dtype), 0, false);
    waitFor(c.runBlocking([&](bool quiet) {
      return c.submit(rr::Collective::kBroadcast, buf, buf, count, dtype, RR_SUM, root, stream, quiet);
    }));
  });
}

rr_result_t rr_allgather(rr_comm_t comm, const void* send, void* recv, size_t count_per_rank,
                         rr_dtype_t dtype, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_allgather");
    rr::checkDtypeOp(rawValue(dtype), 0, false);
    waitFor(c.runBlocking([&](bool quiet) {
      return c.submit(rr::Collective::kAllGather, send, recv, count_per_rank, dtype, RR_SUM, 0, stream, quiet);
    }));
  });
}

rr_result_t rr_reduce_scatter(rr_comm_t comm, const void* send, void* recv,
                              size_t count_per_rank, rr_dtype_t dtype, rr_op_t op, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_reduce_scatter");
    rr::checkDtypeOp(rawValue(dtype), rawValue(op), true);
    waitFor(c.runBlocking([&](bool quiet) {
      return c.submit(rr::Collective::kReduceScatter, send, recv, count_per_rank, dtype, op, 0, stream, quiet);
    }));
  });
}

rr_result_t rr_barrier(rr_comm_t comm) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_barrier");
    waitFor(c.runBlocking([&](bool quiet) { return c.submitBarrier(quiet); }));
  });
}

rr_result_t rr_comm_abort(rr_comm_t comm) {
  return guarded([&] { commOf(comm, "rr_comm_abort").abort(); });
}

rr_result_t rr_comm_get_async_error(rr_comm_t comm, rr_result_t* error) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_comm_get_async_error");
    if (error == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_get_async_error: error is NULL");
    *error = c.asyncError();
  });
}

rr_result_t rr_allreduce_async(rr_comm_t comm, const void* send, void* recv, size_t count,
                               rr_dtype_t dtype, rr_op_t op, void* stream, rr_request_t* req) {
  return guarded([&] {
    checkReqOut(req, "rr_allreduce_async");
    auto& c = commOf(comm, "rr_allreduce_async");
    rr::checkDtypeOp(rawValue(dtype), rawValue(op), true);
    handOut(c.submit(rr::Collective::kAllReduce, send, recv, count, dtype, op, 0, stream), req,
            "rr_allreduce_async");
  });
}

rr_result_t rr_broadcast_async(rr_comm_t comm, void* buf, size_t count, rr_dtype_t dtype,
                               int root, void* stream, rr_request_t* req) {
  return guarded([&] {
    checkReqOut(req, "rr_broadcast_async");
    auto& c = commOf(comm, "rr_broadcast_async");
    rr::checkDtypeOp(rawValue(dtype), 0, false);
    handOut(c.submit(rr::Collective::kBroadcast, buf, buf, count, dtype, RR_SUM, root, stream), req,
            "rr_broadcast_async");
  });
}

rr_result_t rr_allgather_async(rr_comm_t comm, const void* send, void* recv,
                               size_t count_per_rank, rr_dtype_t dtype, void* stream,
                               rr_request_t* req) {
  return guarded([&] {
    checkReqOut(req, "rr_allgather_async");
    auto& c = commOf(comm, "rr_allgather_async");
    rr::checkDtypeOp(rawValue(dtype), 0, false);
    handOut(c.submit(rr::Collective::kAllGather, send, recv, count_per_rank, dtype, RR_SUM, 0, stream),
            req, "rr_allgather_async");
  });
}

rr_result_t rr_reduce_scatter_async(rr_comm_t comm, const void* send, void* recv,
                                    size_t count_per_rank, rr_dtype_t dtype, rr_op_t op,
                                    void* stream, rr_request_t* req) {
  return guarded([&] {
    checkReqOut(req, "rr_reduce_scatter_async");
    auto& c = commOf(comm, "rr_reduce_scatter_async");
    rr::checkDtypeOp(rawValue(dtype), rawValue(op), true);
    handOut(c.submit(rr::Collective::kReduceScatter, send, recv, count_per_rank, dtype, op, 0, stream),
            req, "rr_reduce_scatter_async");
  });
}

rr_result_t rr_test(rr_request_t req, int* done) {
  rr_result_t result = RR_SUCCESS;
  rr_result_t rc = guarded([&] {
    const auto r = requestOf(req, "rr_test");
    if (done == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_test: done is NULL");
    if (!r->done.load(std::memory_order_acquire)) {
      *done = 0;
      result = RR_IN_PROGRESS;
      return;
    }
    *done = 1;
    r->noteWoke();
    if (r->result != RR_SUCCESS) throw rr::Error(r->result, r->error);
  });
  return rc != RR_SUCCESS ? rc : result;
}

rr_result_t rr_wait(rr_request_t req) {
  return guarded([&] {
    waitFor(requestOf(req, "rr_wait"));
  });
}

rr_result_t rr_request_free(rr_request_t req) {
  return guarded([&] {
    if (req == nullptr) return;
    if (!requests().remove(req))
      rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_request_free: req {} is not a live request (freed already?)",
               static_cast<const void*>(req));
    if (req->creator != thisProcess().load(std::memory_order_relaxed)) {  // a forked child's copy: as rr_comm_destroy
      orphan(req);
      return;
    }
    delete req;
  });
}

}  // extern "C"
