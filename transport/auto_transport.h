// AutoTransport: RR_TRANSPORT=auto in a build with UCX. Rank 0 chooses the transport for
// the whole job from what every rank published at the rendezvous (engine/setup/bootstrap.cc,
// jobTransport): UCX over shared memory where every rank shares one host (the same IP,
// pid and IPC namespaces) and every rank could start UCX; TCP otherwise.
//
//   listen     one TCP listener, as TcpTransport's: the neighbours and partners connect to
//              it under either transport (UcxTransport's address exchange is TCP too);
//              UCX's worker started (shared memory only, unless UCX_TLS says otherwise) to
//              learn whether it can start here; if it cannot (a warning with UCX's own
//              lines in it), this rank publishes kTcp. A rank that knows the job is not on one
//              host (Route::elsewhere) publishes kTcp without starting UCX.
//   choose     rank 0's word: UCX takes over the listener and the worker, or the worker
//              goes and TCP stays
//   connectRing  the chosen transport's
//
// Across hosts TCP stays the choice: UCX's tcp moved less than the TCP backend here, and
// RDMA is untested (docs/transports.md, "Why auto keeps TCP across hosts").
#pragma once

#include <memory>
#include <string>

#include "transport/tcp/tcp_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace rr {

class AutoTransport final : public Transport {
 public:
  AutoTransport(TransportJob job, int socketsPerLink, spdlog::logger& log);

  const char* name() const override;
  TransportKind kind() const override { return ucx_ ? TransportKind::kEither : TransportKind::kTcp; }
  Endpoint listen(const Route& route) override;
  void choose(TransportKind job) override;
  RingLinks connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) override;

 private:
  void offerTcpOnly();

  spdlog::logger& log_;
  int rank_;
  std::unique_ptr<TcpTransport> tcp_;
  std::unique_ptr<UcxTransport> ucx_;  // until choose: while UCX may still be chosen
  Transport* chosen_ = nullptr;
};

}  // namespace rr
