// Communicator; see communicator.h.
#include "engine/communicator.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "engine/bootstrap.h"
#include "engine/progress_engine.h"
#include "kernels/dtype.h"
#include "transport/error.h"
#include "transport/tcp/tcp_link.h"

namespace rr {
namespace {

std::shared_ptr<spdlog::logger> makeLogger(const Config& c) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("ringreduce", std::move(sink));
  log->set_pattern(fmt::format("[%H:%M:%S.%e] [ringreduce rank {}] [%l] %v", c.rank));
  auto level = spdlog::level::from_str(c.logLevel);
  if (level == spdlog::level::off && c.logLevel != "off")
    fail(RR_ERR_INVALID_ARGUMENT,
         "RR_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, off", c.logLevel);
  log->set_level(level);
  log->flush_on(spdlog::level::warn);
  return log;
}

size_t checkedBytes(size_t count, size_t factor, size_t elemSize, const char* what) {
  size_t elems = 0, bytes = 0;
  if (__builtin_mul_overflow(count, factor, &elems) ||
      __builtin_mul_overflow(elems, elemSize, &bytes) || bytes > (size_t{1} << 62))
    fail(RR_ERR_INVALID_ARGUMENT, "{}: count {} x {} elements of {} bytes overflows", what, count,
         factor, elemSize);
  return bytes;
}

}  // namespace

void checkDtypeOp(int dtype, int op, bool needOp) {
  if (!dtypeValid(dtype))
    fail(RR_ERR_INVALID_ARGUMENT, "unknown dtype {} (valid: 0..{})", dtype, kNumDtypes - 1);
  if (needOp && !opValid(op))
    fail(RR_ERR_INVALID_ARGUMENT, "unknown reduction op {} (valid: 0..{})", op, kNumOps - 1);
}

std::unique_ptr<Communicator> Communicator::create(const rr_config_t* overrides) {
  Config config = Config::load(overrides);
  auto log = makeLogger(config);
  std::unique_ptr<Communicator> comm(new Communicator(std::move(config), std::move(log)));
  comm->connect();
  return comm;
}

Communicator::Communicator(Config config, std::shared_ptr<spdlog::logger> log)
    : config_(std::move(config)), log_(std::move(log)) {}

Communicator::~Communicator() {
  if (left_) left_->shutdown();
  if (right_) right_->shutdown();
  engine_.reset();
  left_.reset();
  right_.reset();
  if (epollFd_ >= 0) ::close(epollFd_);
}

void Communicator::connect() {
  log_->info("config: {}", config_.describe());
  if (config_.secret.empty() && config_.size > 1)
    log_->warn("RR_SECRET is not set: connections are authenticated with an empty key");
  barrierBuf_ = std::make_unique<uint8_t[]>(static_cast<size_t>(config_.size));
  if (config_.size == 1) return;
  epollFd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epollFd_ < 0) failErrno(errno, "epoll_create1");
  bootstrap_ = std::make_unique<RingSockets>(connectRing(config_, *log_));
  const int left = (config_.rank - 1 + config_.size) % config_.size;
  const int right = (config_.rank + 1) % config_.size;
  left_ = std::make_unique<TcpLink>(std::move(bootstrap_->left), epollFd_, left,
                                    fmt::format("rank {} (left neighbour)", left));
  right_ = std::make_unique<TcpLink>(std::move(bootstrap_->right), epollFd_, right,
                                     fmt::format("rank {} (right neighbour)", right));
  engine_ = std::make_unique<ProgressEngine>(config_.rank, config_.size, left_.get(),
                                             right_.get(), epollFd_, config_.segmentBytes,
                                             config_.timeoutMs);
}

void Communicator::allreduce(const void* send, void* recv, size_t count, rr_dtype_t dtype,
                             rr_op_t op) {
  execute(Collective::kAllReduce, send, recv, count, dtype, op, 0);
}

void Communicator::broadcast(void* buf, size_t count, rr_dtype_t dtype, int root) {
  execute(Collective::kBroadcast, buf, buf, count, dtype, RR_SUM, root);
}

void Communicator::allgather(const void* send, void* recv, size_t countPerRank, rr_dtype_t dtype) {
  execute(Collective::kAllGather, send, recv, countPerRank, dtype, RR_SUM, 0);
}

void Communicator::reduceScatter(const void* send, void* recv, size_t countPerRank,
                                 rr_dtype_t dtype, rr_op_t op) {
  execute(Collective::kReduceScatter, send, recv, countPerRank, dtype, op, 0);
}

void Communicator::barrier() {
  // An all-reduce with one element per block: every rank's result depends on every rank.
  std::memset(barrierBuf_.get(), 0, static_cast<size_t>(config_.size));
  execute(Collective::kAllReduce, barrierBuf_.get(), barrierBuf_.get(),
          static_cast<size_t>(config_.size), RR_UINT8, RR_MAX, 0);
}

void Communicator::execute(Collective kind, const void* send, void* recv, size_t count,
                           rr_dtype_t dtype, rr_op_t op, int root) {
  const char* name = collectiveName(kind);
  if (error_) throw Error(error_->first, error_->second);
  const bool reduces = kind == Collective::kAllReduce || kind == Collective::kReduceScatter;
  checkDtypeOp(dtype, op, reduces);
  const size_t es = dtypeSize(dtype);
  const size_t n = static_cast<size_t>(config_.size);
  const bool blocks = kind == Collective::kAllGather || kind == Collective::kReduceScatter;
  const size_t sendBytes = checkedBytes(count, kind == Collective::kReduceScatter ? n : 1, es, name);
  const size_t recvBytes = checkedBytes(count, kind == Collective::kAllGather ? n : 1, es, name);
  if (count > 0 && (send == nullptr || recv == nullptr))
    fail(RR_ERR_INVALID_ARGUMENT, "{} on rank {}: {} buffer is NULL with count {}", name,
         config_.rank, send == nullptr ? (kind == Collective::kBroadcast ? "the" : "the send")
                                       : "the receive",
         count);
  if (kind == Collective::kBroadcast && (root < 0 || root >= config_.size))
    fail(RR_ERR_INVALID_ARGUMENT, "broadcast on rank {}: root {} is out of range 0..{}",
         config_.rank, root, config_.size - 1);
  const auto* s = static_cast<const uint8_t*>(send);
  const auto* r = static_cast<const uint8_t*>(recv);
  // In place as in NCCL: allgather's send is the rank's block of recv; reduce_scatter's
  // recv is the rank's block of send; the others' buffers are the same pointer.
  const size_t myBlock = static_cast<size_t>(config_.rank) * count * es;
  const bool inPlaceAg = kind == Collective::kAllGather && s == r + myBlock;
  const bool inPlaceRs = kind == Collective::kReduceScatter && r == s + myBlock;
  const bool samePointer = send == recv && kind != Collective::kReduceScatter;
  if (count > 0 && !samePointer && !inPlaceAg && !inPlaceRs && s < r + recvBytes && r < s + sendBytes)
    fail(RR_ERR_INVALID_ARGUMENT,
         "{} on rank {}: send and receive buffers overlap without being in place (in place "
         "means send == recv; for allgather send == recv + rank * count, for reduce_scatter "
         "recv == send + rank * count)",
         name, config_.rank);

  OpDesc desc{++seq_, kind, dtype, reduces ? op : RR_SUM,
              kind == Collective::kBroadcast ? root : 0, count};
  if (config_.size == 1) return runLocal(kind, send, recv, count, dtype);
  if (kind == Collective::kAllGather && !inPlaceAg && count > 0)
    std::memcpy(static_cast<uint8_t*>(recv) + myBlock, send, sendBytes);

  ScheduleParams params;
  params.kind = kind;
  params.rank = config_.rank;
  params.size = config_.size;
  params.count = count;
  params.depth = ProgressEngine::kDepth;
  params.root = root;
  // Segments: a quarter of the largest block, rounded to 4 KiB, at most RR_SEGMENT_BYTES.
  const size_t blockBytes = blocks ? count * es : (count * es + n - 1) / n;
  const size_t wanted = (blockBytes + ProgressEngine::kDepth - 1) / ProgressEngine::kDepth;
  const size_t segBytes = std::clamp<size_t>((wanted + 4095) / 4096 * 4096, 4096,
                                             engine_->segmentBytes());
  params.segElems = std::max<size_t>(1, segBytes / es);
  if (kind == Collective::kBroadcast) {  // a chain: n-1 hops deep, so cut finer
    const size_t chainSeg = std::clamp<size_t>((count * es / 8 + 4095) / 4096 * 4096, 4096,
                                               engine_->segmentBytes());
    params.segElems = std::max<size_t>(1, chainSeg / es);
  }
  try {
    engine_->run(RingSchedule(params), desc, send, recv);
  } catch (const Error& e) {
    poison(e, desc.seq);
    throw;
  }
}

void Communicator::runLocal(Collective kind, const void* send, void* recv, size_t count,
                            rr_dtype_t dtype) {
  if (count == 0 || send == recv || kind == Collective::kBroadcast) return;
  std::memmove(recv, send, count * dtypeSize(dtype));  // one rank: the reduction is a copy
}

void Communicator::poison(const Error& error, uint64_t seq) {
  error_ = std::make_pair(error.code(), std::string(error.what()));
  log_->error("{}", error.what());
  // Forward the first failure to both neighbours (a received abort keeps its origin). The
  // sockets stay open so that the frame is read before the connection ends; a link whose
  // frame could not go out is closed so the neighbour sees the loss now, not at its timeout.
  const int origin = error.origin() >= 0 ? error.origin() : config_.rank;
  const uint64_t originSeq = error.origin() >= 0 ? error.seq() : seq;
  for (Link* link : {left_.get(), right_.get()})
    if (!link->sendAbort(origin, error.code(), originSeq, error.reason())) link->shutdown();
}

}  // namespace rr
