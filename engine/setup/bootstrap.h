// Bootstrap: from a Config to connected ring links (docs/design.md, "Forming a job").
//
//   1. rank 0 listens at RR_ADDR (rendezvous.h: event-driven, one thread); every other rank
//      connects there (retrying until the deadline), passes the HMAC handshake, and
//      publishes the address of its data listener (or why it cannot join)
//   2. rank 0 answers every rank with the job's size, its right neighbour's address and
//      those of the recursive doubling partners it connects to (O(n log n) bytes in all),
//      or with why the job cannot form
//   3. the transport (transport/transport.h) connects each rank's links to its neighbours
//      and partners: to the right neighbour and the higher partners at the endpoints they
//      published, while it accepts the left neighbour and the lower partners
//   4. each rank reports to rank 0 whether its links formed (and, if they did, what its
//      links prefer); rank 0 answers every rank with the first failure, so init fails
//      everywhere with the reason, or nowhere (or with success and what every link prefers)
// (bootstrap_wire.h has the messages.)
//
// A connection that fails its handshake, names a rank out of range or a rank that already
// joined is rejected and logged with the peer's address; rendezvous goes on until the
// deadline. The bootstrap connections stay open for the communicator's life.
#pragma once

#include <string>
#include <vector>

#include "engine/setup/config.h"
#include "transport/socket.h"
#include "transport/transport.h"

namespace spdlog {
class logger;
}

namespace rr {

struct Ring {
  RingLinks links;
  std::vector<Fd> bootstrap;  // rank 0: one per other rank; others: the one to rank 0
  // Every link of every rank prefers large frames (Link::prefersLargeFrames), as rank 0
  // found from the reports of step 4: the same on every rank.
  bool largeFrames = false;
  // Every link of every rank prefers frames that fit one of its transport's fragments
  // (Link::prefersFragmentFrames), found alike.
  bool fragmentFrames = false;
  // Every rank published the same IP for its transport (every link was dialled to the
  // dialler's own address, so the connected ring has one): the job runs on one host, or in
  // one network namespace. The same on every rank; auto's thresholds depend on it
  // (engine/plan/algorithm.h).
  bool oneHost = false;
};

// The job's settings as a transport sees them.
TransportJob transportJob(const Config& config);
Ring connectRing(const Config& config, Transport& transport, EventSet& events, spdlog::logger& log);

}  // namespace rr
