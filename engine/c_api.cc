// The C API: the only extern "C" definitions. Each call validates what it can, runs inside
// a guard that catches every exception and maps it to a result code, and keeps the message
// for rr_last_error on this thread. No exception crosses this boundary.
#include <cstring>
#include <new>
#include <string>

#include "engine/communicator.h"
#include "engine/request.h"
#include "kernels/device.h"
#include "ringreduce/ringreduce.h"
#include "transport/error.h"

struct rr_comm {
  std::unique_ptr<rr::Communicator> impl;
};

struct rr_request {
  std::shared_ptr<rr::Request> impl;
};

namespace {

thread_local std::string lastError;

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
  if (comm == nullptr || !comm->impl) rr::fail(RR_ERR_INVALID_ARGUMENT, "{}: comm is NULL", call);
  return *comm->impl;
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
    auto handle = std::make_unique<rr_comm>();
    handle->impl = rr::Communicator::create(config);
    *comm = handle.release();
  });
}

rr_result_t rr_comm_init_from_env(rr_comm_t* comm) {
  return guarded([&] {
    if (comm == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_comm_init_from_env: comm is NULL");
    *comm = nullptr;
    auto handle = std::make_unique<rr_comm>();
    handle->impl = rr::Communicator::create(nullptr);
    *comm = handle.release();
  });
}

rr_result_t rr_comm_destroy(rr_comm_t comm) {
  return guarded([&] { delete comm; });
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
    waitFor(c.submit(rr::Collective::kAllReduce, send, recv, count, dtype, op, 0, stream));
  });
}

rr_result_t rr_broadcast(rr_comm_t comm, void* buf, size_t count, rr_dtype_t dtype, int root,
                         void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_broadcast");
    rr::checkDtypeOp(rawValue(dtype), 0, false);
    waitFor(c.submit(rr::Collective::kBroadcast, buf, buf, count, dtype, RR_SUM, root, stream));
  });
}

rr_result_t rr_allgather(rr_comm_t comm, const void* send, void* recv, size_t count_per_rank,
                         rr_dtype_t dtype, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_allgather");
    rr::checkDtypeOp(rawValue(dtype), 0, false);
    waitFor(c.submit(rr::Collective::kAllGather, send, recv, count_per_rank, dtype, RR_SUM, 0, stream));
  });
}

rr_result_t rr_reduce_scatter(rr_comm_t comm, const void* send, void* recv,
                              size_t count_per_rank, rr_dtype_t dtype, rr_op_t op, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_reduce_scatter");
    rr::checkDtypeOp(rawValue(dtype), rawValue(op), true);
    waitFor(c.submit(rr::Collective::kReduceScatter, send, recv, count_per_rank, dtype, op, 0, stream));
  });
}

rr_result_t rr_barrier(rr_comm_t comm) {
  return guarded([&] { waitFor(commOf(comm, "rr_barrier").submitBarrier()); });
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
    if (req == nullptr || !req->impl) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_test: req is NULL");
    if (done == nullptr) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_test: done is NULL");
    if (!req->impl->done.load(std::memory_order_acquire)) {
      *done = 0;
      result = RR_IN_PROGRESS;
      return;
    }
    *done = 1;
    if (req->impl->result != RR_SUCCESS) throw rr::Error(req->impl->result, req->impl->error);
  });
  return rc != RR_SUCCESS ? rc : result;
}

rr_result_t rr_wait(rr_request_t req) {
  return guarded([&] {
    if (req == nullptr || !req->impl) rr::fail(RR_ERR_INVALID_ARGUMENT, "rr_wait: req is NULL");
    waitFor(req->impl);
  });
}

rr_result_t rr_request_free(rr_request_t req) {
  return guarded([&] { delete req; });
}

}  // extern "C"
