// Transport: how a rank's two ring links are made, once the rendezvous has told it where
// its right neighbour listens (docs/design.md, "Forming a job"), and its links to the partners of recursive
// doubling (engine/plan/rd_schedule.h: log2 n of them, at n > 2).
//
//   engine (bootstrap.cc)                          transport
//   rendezvous with rank 0 ----------------------> listen(route): where peers reach me
//   publish it; learn the right neighbour's  <----'
//   and the higher partners' endpoints
//   connectRing(peers, events) ------------------> links to both neighbours and to every
//   agree with rank 0 that every ring formed          partner, their fds registered in the
//                                                     engine's EventSet
//
// The engine keeps the rendezvous (the authenticated bootstrap and the address table) and
// never names a socket; a transport knows nothing of collectives. Whatever a transport
// listens on admits only peers that prove the job secret (handshake.h) and are the
// neighbour the rendezvous named, so a transport never widens who may join.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/handshake.h"
#include "transport/link.h"
#include "transport/socket.h"

namespace spdlog {
class logger;
}

namespace rr {

// Where a rank's transport listens, as the rendezvous carries it (bootstrap_wire.h).
struct Endpoint {
  std::string ip;
  uint16_t port = 0;
};

struct RingLinks {
  std::unique_ptr<Link> left;   // from rank (r-1+n)%n: this rank receives here
  std::unique_ptr<Link> right;  // to rank (r+1)%n: this rank sends here
  std::vector<std::unique_ptr<Link>> partners;  // one per partner (Link::peerRank), both ways
};

// Whom a rank connects to: its right neighbour, the partners it connects to (the higher
// rank of a pair accepts), and the partners whose connections it accepts.
struct RingPeers {
  Endpoint right;
  std::vector<std::pair<int, Endpoint>> connect;
  std::vector<int> accept;
};

// Which transport a rank runs, as it publishes it in the rendezvous (bootstrap_wire.h):
// one of the two, or either (RR_TRANSPORT=auto in a build with UCX), when rank 0 chooses
// for the whole job (bootstrap.cc, jobTransport).
enum class TransportKind : uint8_t { kTcp = 0, kUcx = 1, kEither = 2 };

// What a rank learned at the rendezvous before it listens.
struct Route {
  std::string ip;  // this rank's address on the route to rank 0
  // Empty where every rank of the job may share this rank's host; else why they cannot
  // (rank 0's address is none of this rank's network namespace: interfaces.h,
  // isAddressHere; at rank 0, the others' arrivals already tell).
  std::string elsewhere;
};

// What every transport is told about the job.
struct TransportJob {
  int rank = 0;
  int size = 1;
  JobIdentity identity;
  std::string ifname;  // RR_SOCKET_IFNAME (NCCL syntax); empty: the route to rank 0
  int connectTimeoutMs = 0;  // RR_CONNECT_TIMEOUT_MS, for messages
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // What this rank publishes: the transport it runs, or kEither where it takes rank 0's choice.
  virtual TransportKind kind() const = 0;
  // Rank 0's choice for the job (kTcp or kUcx, the same on every rank), after listen and
  // before connectRing. A transport of one kind has nothing to do. Throws Error.
  virtual void choose(TransportKind /*job*/) {}

  // Opens what the neighbours connect to. `route.ip` is this rank's address on the route to
  // rank 0 (the default when no interface is chosen). Returns the endpoint to publish.
  virtual Endpoint listen(const Route& route) = 0;
  // Connects to the right neighbour and the partners in peers.connect while accepting the
  // left neighbour and the partners in peers.accept (all at once, or the ring would
  // deadlock); registers the links' fds in `events`. A partner's connection says so in its
  // hello (kPartnerLink), so a neighbour that is also a partner connects twice. Throws Error
  // naming the peer and what went wrong; by `deadline` at the latest.
  virtual RingLinks connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) = 0;
};

}  // namespace rr
