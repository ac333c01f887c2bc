// TcpTransport: ring links over TCP, each striped over RR_SOCKETS_PER_LINK sockets
// (tcp_link.h). Its listener takes the left neighbour's sockets with the authenticated
// handshake (role kData, the socket's index and count in the hello), one thread per
// handshake in progress (acceptor.h); it connects the same number to the right neighbour.
// A recursive doubling partner's link is one socket (it carries small buckets only), its
// hello's index kPartnerLink; the lower rank of a pair connects.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace rr {

class TcpTransport final : public Transport {
 public:
  TcpTransport(TransportJob job, int socketsPerLink, spdlog::logger& log);

  const char* name() const override { return "tcp"; }
  TransportKind kind() const override { return TransportKind::kTcp; }
  Endpoint listen(const Route& route) override;
  RingLinks connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) override;
  // The listener, for another transport to take in its place (AutoTransport).
  Fd releaseListener() { return std::move(listener_); }

 private:
  // The left neighbour's sockets, in socket-index order, and one socket per partner in
  // `partners` (filled in).
  std::vector<Fd> acceptPeers(const std::vector<int>& accept, std::map<int, Fd>& partners, Deadline deadline);
  std::vector<Fd> connectRight(const Endpoint& right, Deadline deadline);
  // One data socket to `end` (the peer `who`), past the handshake with hello index `index`.
  Fd dial(const Endpoint& end, const std::string& who, uint16_t index, Deadline deadline);

  TransportJob job_;
  int socketsPerLink_;
  spdlog::logger& log_;
  Fd listener_;
  Endpoint self_;
};

}  // namespace rr
