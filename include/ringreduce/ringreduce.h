/*
 * ringreduce: ring all-reduce for data-parallel training.
 *
 * This is the only public header and the only exported interface of libringreduce.
 * It is plain C (C99 and later, C++ too), every handle is opaque, and every call returns
 * an rr_result_t; rr_last_error() gives the message of the last failed call on this thread.
 *
 * Thread safety: every call may be made from any thread without corrupting the library.
 * But collectives are matched across ranks by their order alone: each communicator runs
 * them on one background thread in the order they were submitted, and the n-th collective
 * of one rank meets the n-th of every other rank. Submit from ONE thread per communicator
 * (or in an order the program itself enforces, the same on every rank). If several threads
 * submit on one communicator, their calls interleave differently on different ranks: calls
 * that differ in count, dtype, op or kind fail with RR_ERR_MISMATCH, but calls of the same
 * shape are silently reduced with another thread's data. For concurrency, submit several
 * rr_*_async calls from one thread and wait for them from any thread, or give each thread a
 * communicator of its own. Requests may be tested, waited on and freed from any thread.
 */
#ifndef RINGREDUCE_RINGREDUCE_H
#define RINGREDUCE_RINGREDUCE_H

#include <stddef.h>

#define RR_VERSION_MAJOR 0
#define RR_VERSION_MINOR 1
#define RR_VERSION_PATCH 0
/* RR_VERSION_MAJOR * 10000 + RR_VERSION_MINOR * 100 + RR_VERSION_PATCH, as rr_version() returns. */
#define RR_VERSION_CODE (RR_VERSION_MAJOR * 10000 + RR_VERSION_MINOR * 100 + RR_VERSION_PATCH)

#if defined(RR_BUILDING_LIBRARY) && defined(__GNUC__)
#define RR_API __attribute__((visibility("default")))
#else
#define RR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  RR_SUCCESS = 0,
  RR_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, unknown dtype/op, bad rank, overflow, ... */
  RR_ERR_MISMATCH = 2,         /* ranks called different collectives, counts, dtypes, ops or roots */
  RR_ERR_TIMEOUT = 3,          /* no progress for the timeout; the message names the peer */
  RR_ERR_PEER_LOST = 4,        /* a peer closed its link or reported a failure */
  RR_ERR_AUTH = 5,             /* handshake failed: wrong secret, job, protocol version */
  RR_ERR_ABORTED = 6,          /* the communicator was aborted */
  RR_ERR_SYSTEM = 7,           /* an operating-system call failed, or a peer broke the protocol */
  RR_ERR_CUDA = 8,             /* a CUDA call failed */
  RR_ERR_UNSUPPORTED = 9,      /* the build or the platform lacks what was asked for */
  RR_ERR_INTERNAL = 10,        /* a bug in ringreduce */
  RR_IN_PROGRESS = 11          /* returned by rr_test while an operation runs */
} rr_result_t;

typedef enum {
  RR_FLOAT32 = 0,
  RR_FLOAT64 = 1,
  RR_FLOAT16 = 2,
  RR_BFLOAT16 = 3,
  RR_INT8 = 4,
  RR_UINT8 = 5,
  RR_INT32 = 6,
  RR_UINT32 = 7,
  RR_INT64 = 8,
  RR_UINT64 = 9
} rr_dtype_t;

/* RR_AVG: for floats, each rank's value multiplied by 1/n, then summed (as NCCL does), so an
 * average that fits never overflows; for integers, the SUM (which wraps in the type's
 * width) divided by n, truncating toward zero: uint8 avg(200, 200) on 2 ranks is 72. Integer
 * SUM and PROD wrap around (two's complement), as in NCCL. MIN and MAX propagate NaN. fp16
 * and bf16 are computed in fp32 but rounded to 16 bits at every hop of the ring. Every rank
 * gets bitwise the same result. */
typedef enum { RR_SUM = 0, RR_PROD = 1, RR_MIN = 2, RR_MAX = 3, RR_AVG = 4 } rr_op_t;

typedef struct rr_comm *rr_comm_t;
/* One submitted collective. Free it with rr_request_free once done with it. */
typedef struct rr_request *rr_request_t;

/* Communicator settings. Start from RR_CONFIG_INIT; a field left at its initial value is
 * taken from the environment (RR_RANK, RR_SIZE, RR_ADDR, RR_SECRET, RR_TIMEOUT_MS,
 * RR_SOCKET_IFNAME, or a launcher's variables), and a field that is set overrides it. */
typedef struct {
  size_t struct_size;   /* sizeof(rr_config_t), set by RR_CONFIG_INIT */
  int rank;             /* this process's rank, 0..size-1; -1: from the environment */
  int size;             /* number of ranks; -1: from the environment */
  const char *addr;     /* rendezvous "host:port" where rank 0 listens; NULL: environment */
  const char *secret;   /* job secret that authenticates every connection; NULL: environment */
  int timeout_ms;       /* no-progress deadline of a collective; 0: environment (default 300000) */
  const char *ifname;   /* interface selection, NCCL_SOCKET_IFNAME syntax; NULL: environment */
} rr_config_t;

#define RR_CONFIG_INIT {sizeof(rr_config_t), -1, -1, NULL, NULL, 0, NULL}

RR_API const char *rr_result_string(rr_result_t result);
/* The message of the last call on this thread that failed; "" if none. Valid until the
 * next ringreduce call on this thread. */
RR_API const char *rr_last_error(void);
/* RR_VERSION_CODE of the library that is loaded. */
RR_API int rr_version(void);

/* Collective over all `size` ranks: every rank calls it, and it returns once the ring is
 * connected. On failure *comm is set to NULL. */
RR_API rr_result_t rr_comm_init(const rr_config_t *config, rr_comm_t *comm);
RR_API rr_result_t rr_comm_init_from_env(rr_comm_t *comm);
/* Closes the links and frees everything; NULL is accepted. Collectives not finished yet
 * (waited for or not) are cancelled as rr_comm_abort cancels them: their requests fail with
 * RR_ERR_ABORTED and the other ranks are told; it returns at once. Wait for your requests
 * first. A handle destroyed already is RR_ERR_INVALID_ARGUMENT (as is a freed request). */
RR_API rr_result_t rr_comm_destroy(rr_comm_t comm);
RR_API rr_result_t rr_comm_rank(rr_comm_t comm, int *rank);
RR_API rr_result_t rr_comm_size(rr_comm_t comm, int *size);

/* Collectives. Every rank must call the same collectives in the same order with the same
 * count, dtype, op and root; a rank that differs makes the call fail with RR_ERR_MISMATCH.
 * After a failure the communicator is poisoned: every later call returns the first error.
 *
 * Buffers are host memory, or (in a build with CUDA) memory of a GPU from cudaMalloc: send
 * and recv both on the host or both on the same GPU, and one GPU per communicator (the one
 * of its first device bucket). Device buckets are reduced by the library's CUDA kernels on
 * its own stream; the host never touches them. Managed memory counts as host memory.
 *
 * `stream` is a cudaStream_t (cast to void *). With a stream, or with device buffers, the
 * collective starts after all work queued on the stream before the call, and work queued
 * on the stream after the call waits until the collective has finished. Both waits happen
 * on the GPU: the call never waits for the GPU, and the stream is held by a wait on a
 * counter in mapped pinned memory (cuStreamWaitValue32, or a one-thread kernel where the
 * device lacks stream memory operations; `ringreduce info` says which) that the library
 * sets when the collective is done; never by a host function, which on Hopper would stall
 * every stream of the process. Kernels on the process's other streams keep running. For
 * device buffers, stream NULL means CUDA's legacy default stream, as in NCCL (which CUDA
 * also orders with every blocking stream). For host buffers, stream NULL means no stream:
 * the collective may start at once; a stream with host buffers must belong to the
 * communicator's GPU. The first call with device buffers or a stream opens the GPU and
 * allocates pinned staging, which synchronises the device once (as cudaHostAlloc does);
 * later calls allocate nothing. Device work that does not finish within the timeout fails
 * the collective with RR_ERR_TIMEOUT naming it and its GPU. A stream in a build without
 * CUDA is RR_ERR_UNSUPPORTED; a failing CUDA call is RR_ERR_CUDA with CUDA's message.
 * rr_wait and rr_test report when the result is in the buffer, for host and device
 * buffers alike. If a collective fails, the stream is released all the same (check the
 * request, the blocking call's result or rr_comm_get_async_error before using the data),
 * and the library's kernels may still touch the buffers until rr_comm_destroy returns.
 * Buckets on a stream or on a GPU never travel fused with others. */

/* recv = op over all ranks of send (count elements); in place when send == recv. */
RR_API rr_result_t rr_allreduce(rr_comm_t comm, const void *send, void *recv, size_t count,
                                rr_dtype_t dtype, rr_op_t op, void *stream);
/* buf of rank `root` is copied into buf of every rank. */
RR_API rr_result_t rr_broadcast(rr_comm_t comm, void *buf, size_t count, rr_dtype_t dtype,
                                int root, void *stream);
/* recv (size * count_per_rank elements) = the ranks' send blocks in rank order; in place
 * when send == recv + rank * count_per_rank. */
RR_API rr_result_t rr_allgather(rr_comm_t comm, const void *send, void *recv,
                                size_t count_per_rank, rr_dtype_t dtype, void *stream);
/* send holds size * count_per_rank elements; rank r receives block r of the reduction. */
RR_API rr_result_t rr_reduce_scatter(rr_comm_t comm, const void *send, void *recv,
                                     size_t count_per_rank, rr_dtype_t dtype, rr_op_t op,
                                     void *stream);
/* Returns once every rank has entered the barrier. */
RR_API rr_result_t rr_barrier(rr_comm_t comm);

/* Aborts the communicator from any thread: within 100 ms every blocking call and every
 * rr_wait on it returns RR_ERR_ABORTED (or the error that came first), the neighbours are
 * told, and every later call returns the same. Destroy it afterwards; a new communicator
 * can then be formed (for example by the survivors of a failure). */
RR_API rr_result_t rr_comm_abort(rr_comm_t comm);
/* Sets *error to the error that poisoned the communicator (a failed collective, a lost
 * peer, an abort), or RR_SUCCESS if there is none. Never blocks. */
RR_API rr_result_t rr_comm_get_async_error(rr_comm_t comm, rr_result_t *error);

/* Asynchronous collectives: the same as the blocking calls, but they return at once with a
 * request; the collective runs on the communicator's background thread in submission order.
 * The buffers must stay valid and untouched until the request is done. The blocking calls
 * are these plus rr_wait. Small all-reduces submitted close together with the same dtype
 * and op may travel as one ring pass (RR_FUSION_BYTES); each request still completes on its
 * own. On failure the call returns the error and sets *req to NULL. */
RR_API rr_result_t rr_allreduce_async(rr_comm_t comm, const void *send, void *recv, size_t count,
                                      rr_dtype_t dtype, rr_op_t op, void *stream,
                                      rr_request_t *req);
RR_API rr_result_t rr_broadcast_async(rr_comm_t comm, void *buf, size_t count, rr_dtype_t dtype,
                                      int root, void *stream, rr_request_t *req);
RR_API rr_result_t rr_allgather_async(rr_comm_t comm, const void *send, void *recv,
                                      size_t count_per_rank, rr_dtype_t dtype, void *stream,
                                      rr_request_t *req);
RR_API rr_result_t rr_reduce_scatter_async(rr_comm_t comm, const void *send, void *recv,
                                           size_t count_per_rank, rr_dtype_t dtype, rr_op_t op,
                                           void *stream, rr_request_t *req);
/* Sets *done to 1 and returns the collective's result once it has finished (RR_SUCCESS or
 * its error); sets *done to 0 and returns RR_IN_PROGRESS while it runs. Never blocks. */
RR_API rr_result_t rr_test(rr_request_t req, int *done);
/* Blocks until the collective has finished and returns its result. */
RR_API rr_result_t rr_wait(rr_request_t req);
/* Releases the request. A request still running completes normally (its buffers must stay
 * valid until then); its result is discarded. NULL is accepted. */
RR_API rr_result_t rr_request_free(rr_request_t req);

#ifdef __cplusplus
}
#endif

#endif /* RINGREDUCE_RINGREDUCE_H */
