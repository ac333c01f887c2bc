// Abort and fault propagation (docs/reliability.md): the first failure of a communicator is
// kept (sticky) and returned by every later call; the rank forwards it in an abort frame to
// both neighbours and every partner, which pass it on, so every rank fails at once with the
// first failure's reason, and rr_comm_abort unblocks every wait within 100 ms. (Which abort
// a rank reports when a neighbour's frame and a lost connection race is the pass
// agreement's: engine/run/agreement.h.)
#include <spdlog/spdlog.h>

#include <chrono>

#include "base/error.h"
#include "engine/communicator.h"
#include "engine/run/waker.h"
#include "transport/link.h"

namespace rr {

std::optional<std::pair<rr_result_t, std::string>> Communicator::stickyError() {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

void Communicator::abort() { abort(fmt::format("rank {}: rr_comm_abort was called", config_.rank)); }

void Communicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!error_) error_ = std::make_pair(RR_ERR_ABORTED, reason);
  }
  aborted_ = true;
  if (waker_) waker_->wake();
  queue_.wake();
}

rr_result_t Communicator::asyncError() {
  auto e = stickyError();
  return e ? e->first : RR_SUCCESS;
}

void Communicator::sendAbortOnce() {
  if (!aborted_ || abortSent_) return;
  abortSent_ = true;
  const auto e = stickyError();
  poison(Error(e->first, e->second), queue_.lastSubmitted());
}

void Communicator::poison(const Error& error, uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!error_) error_ = std::make_pair(error.code(), std::string(error.what()));
  }
  log_->error("{}", error.what());
  if (monitor_) monitor_->quiet();
  // Forward the first failure to both neighbours and every partner (a received abort keeps
  // its origin). The sockets stay open so that the frame is read before the connection
  // ends; a link whose frame could not go out is closed so the peer sees the loss now, not
  // at its timeout. Every frame is on its way before any wait, and the waits share one
  // bound: over UCX a stopped peer whose queue is full costs the rank 100 ms, not 100 ms a
  // link (a TCP link sends its frame in startAbort, within its own bound).
  const auto since = std::chrono::steady_clock::now();
  const int origin = error.origin() >= 0 ? error.origin() : config_.rank;
  const uint64_t originSeq = error.origin() >= 0 ? error.seq() : seq;
  for (Link* link : links()) link->startAbort(origin, error.code(), originSeq, error.reason());
  for (Link* link : links())
    if (!link->finishAbort(since + std::chrono::milliseconds(100))) link->shutdown();
  // The failed collective's buffers go back to the caller next: no link may touch them.
  for (Link* link : links()) link->beginQuiesce();
  for (Link* link : links()) link->quiesce(since);
}

}  // namespace rr
