// AutoTransport; see auto_transport.h.
#include "transport/auto_transport.h"

#include <spdlog/spdlog.h>

#include "base/error.h"

namespace rr {

AutoTransport::AutoTransport(TransportJob job, int socketsPerLink, spdlog::logger& log)
    : log_(log),
      rank_(job.rank),
      tcp_(std::make_unique<TcpTransport>(job, socketsPerLink, log)),
      ucx_(std::make_unique<UcxTransport>(std::move(job), log, true)) {}

const char* AutoTransport::name() const { return chosen_ != nullptr ? chosen_->name() : "auto"; }

Endpoint AutoTransport::listen(const Route& route) {
  const Endpoint self = tcp_->listen(route);
  if (!route.elsewhere.empty()) {  // rank 0 will choose TCP, whatever this rank offers
    log_.info("RR_TRANSPORT=auto: {}, so rank {} offers TCP only and does not start UCX", route.elsewhere, rank_);
    offerTcpOnly();
    return self;
  }
  HeldUcxLines held;  // UCX's own lines, should it fail: they go into this rank's warning
  try {
    ucx_->startWorker();
  } catch (const Error& e) {
    const std::string said = held.take();
    log_.warn("RR_TRANSPORT=auto: UCX cannot start on rank {} ({}{}{}); this rank offers TCP only, so the "
              "job runs over TCP", rank_, e.what(), said.empty() ? "" : "; UCX said: ", said);
    offerTcpOnly();
  }
  return self;
}

void AutoTransport::offerTcpOnly() {
  ucx_.reset();
  chosen_ = tcp_.get();  // kind() says kTcp now: rank 0 will choose TCP for every rank
}

void AutoTransport::choose(TransportKind job) {
  if (job == TransportKind::kUcx && ucx_) {
    ucx_->adoptListener(tcp_->releaseListener());
    chosen_ = ucx_.get();
  } else {
    if (job == TransportKind::kUcx)  // rank 0 checks every rank's offer: not reached
      fail(RR_ERR_INTERNAL, "rank {}: rank 0 chose UCX, which this rank cannot start", rank_);
    ucx_.reset();  // its worker and shared memory go now
    chosen_ = tcp_.get();
  }
}

RingLinks AutoTransport::connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) {
  if (chosen_ == nullptr) fail(RR_ERR_INTERNAL, "rank {}: the transport was not chosen before connecting", rank_);
  return chosen_->connectRing(peers, events, deadline);
}

}  // namespace rr
