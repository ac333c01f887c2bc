// The C API: the only extern "C" definitions. Each call validates what it can, runs inside
// a guard that catches every exception and maps it to a result code, and keeps the message
// for rr_last_error on this thread. No exception crosses this boundary.
#include <new>
#include <string>

#include "engine/communicator.h"
#include "ringreduce/ringreduce.h"
#include "transport/error.h"

struct rr_comm {
  std::unique_ptr<rr::Communicator> impl;
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

void checkStream(void* stream, const char* call) {
  if (stream != nullptr)
    rr::fail(RR_ERR_UNSUPPORTED,
             "{}: stream must be NULL; device buffers are not supported by this build yet", call);
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
    checkStream(stream, "rr_allreduce");
    c.allreduce(send, recv, count, dtype, op);
  });
}

rr_result_t rr_broadcast(rr_comm_t comm, void* buf, size_t count, rr_dtype_t dtype, int root,
                         void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_broadcast");
    checkStream(stream, "rr_broadcast");
    c.broadcast(buf, count, dtype, root);
  });
}

rr_result_t rr_allgather(rr_comm_t comm, const void* send, void* recv, size_t count_per_rank,
                         rr_dtype_t dtype, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_allgather");
    checkStream(stream, "rr_allgather");
    c.allgather(send, recv, count_per_rank, dtype);
  });
}

rr_result_t rr_reduce_scatter(rr_comm_t comm, const void* send, void* recv,
                              size_t count_per_rank, rr_dtype_t dtype, rr_op_t op, void* stream) {
  return guarded([&] {
    auto& c = commOf(comm, "rr_reduce_scatter");
    checkStream(stream, "rr_reduce_scatter");
    c.reduceScatter(send, recv, count_per_rank, dtype, op);
  });
}

rr_result_t rr_barrier(rr_comm_t comm) {
  return guarded([&] { commOf(comm, "rr_barrier").barrier(); });
}

}  // extern "C"
