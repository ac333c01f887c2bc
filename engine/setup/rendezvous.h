// Rendezvous: rank 0's side of the bootstrap (docs/design.md, "Forming a job"), event-driven
// on Asio.
//
//   rank r --connect--> rank 0: challenge, hello + HMAC, reply, arrival (bootstrap_wire.h)
//
// One thread (the caller's) runs an io_context: asynchronous accepts, and for every
// connection an asynchronous handshake and endpoint read under a deadline timer of its own
// (5 s), so a client that stalls or sends garbage holds up only itself, however many there
// are, and rank 0's thread count does not grow with the number of ranks. Every rejection
// is logged with the peer's address and counted (with its code: RR_ERR_AUTH only for a
// failed proof of the secret). A rank that reached rank 0 but cannot take part (it says
// why instead of sending its endpoint) ends the rendezvous: rank 0 goes on answering for a
// second, so that ranks still on their way hear the reason, then tells every rank that
// joined, and throws. Asio never appears outside rendezvous.cc (and asio_impl.cc, which
// compiles it once).
#pragma once

#include <vector>

#include "engine/setup/bootstrap_wire.h"
#include "engine/setup/config.h"
#include "transport/socket.h"

namespace spdlog {
class logger;
}

namespace rr {

// Accepts ranks 1..size-1 on listenFd until all have joined or the deadline. Returns their
// bootstrap connections (index = rank; [0] empty) and fills table[1..size-1] with their
// arrivals (data endpoints, namespaces, transports). On failure (a rank missing at the deadline, a rank that cannot join)
// every rank that joined is told why, then Error is thrown.
std::vector<Fd> gatherRanks(const Config& c, int listenFd, std::vector<Arrival>& table,
                            Deadline deadline, spdlog::logger& log);

// Rank 0 holds one bootstrap connection per rank for the job's life: raise the soft limit
// of open files toward the hard one when `needed` does not fit (logged); never lowers it.
void reserveFds(int needed, spdlog::logger& log);

}  // namespace rr
