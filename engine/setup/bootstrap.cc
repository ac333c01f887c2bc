// Rendezvous through rank 0, then the ring connections; see bootstrap.h.
#include "engine/setup/bootstrap.h"

#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "engine/setup/bootstrap_wire.h"
#include "engine/plan/rd_schedule.h"
#include "engine/setup/rendezvous.h"
#include "base/error.h"
#include "transport/handshake.h"
#include "transport/interfaces.h"
#include "base/wire.h"

namespace rr {
namespace {

JobIdentity jobOf(const Config& c) { return JobIdentity{c.jobId, c.secret}; }

// The traits of this rank's links (bootstrap_wire.h): bits every link has. Each link is
// dialled by one of its two ranks, to the endpoint the other published, so the AND over
// every rank of "each peer I dialled published my IP" holds only if all ranks did.
uint32_t linkTraits(const RingLinks& links, const Endpoint& self, const RingPeers& peers) {
  auto everyLink = [&links](bool (Link::*says)() const) {
    bool all = links.left && links.right && ((*links.left).*says)() && ((*links.right).*says)();
    for (const auto& p : links.partners) all = all && ((*p).*says)();
    return all;
  };
  const bool large = everyLink(&Link::prefersLargeFrames);
  const bool fragments = everyLink(&Link::prefersFragmentFrames);
  bool oneHost = sameHostAddress(peers.right.ip, self.ip);
  for (const auto& [rank, e] : peers.connect) oneHost = oneHost && sameHostAddress(e.ip, self.ip);
  return (large ? kTraitLargeFrames : 0) | (oneHost ? kTraitOneHost : 0) | (fragments ? kTraitFragmentFrames : 0);
}

void sendTraits(int fd, uint32_t traits, Deadline deadline, const std::string& what) {
  uint8_t b[4];
  wire::put32(b, traits);
  sendAll(fd, b, 4, deadline, what);
}

uint32_t recvTraits(int fd, Deadline deadline, const std::string& what) {
  uint8_t b[4];
  recvAll(fd, b, 4, deadline, what);
  return wire::get32(b);
}

// After the ring: every rank reports to rank 0 whether its links formed, and rank 0 answers
// every rank with the first failure (or success), so init fails on every rank, with the
// reason, or on none. A rank whose report does not come is a failure too. On success,
// returns the traits every rank's links have (the same on every rank).
uint32_t agreeOnRing(const Config& c, Ring& ring, const std::optional<Error>& own, Deadline deadline,
                     const Endpoint& self, const RingPeers& peers) {
  const uint32_t mine = own ? 0 : linkTraits(ring.links, self, peers);
  if (c.rank != 0) {
    Fd& root = ring.bootstrap[0];
    if (own) {
      // Rank 0's verdict, when it comes soon, names the first failure (often the cause of
      // this one: a neighbour that failed first); else this rank's own error stands.
      tryStatus(root.get(), *own, "rank 0");
      std::optional<Error> verdict;
      try {
        Error v = recvStatus(root.get(), deadlineIn(3000), "rank 0");
        if (v.code() != RR_SUCCESS) verdict = std::move(v);
      } catch (const Error&) {
      }
      if (verdict)
        fail(verdict->code(), "{} (reported by rank 0; on rank {}: {})", verdict->what(), c.rank, own->what());
      throw *own;
    }
    sendStatus(root.get(), RR_SUCCESS, "", deadline, "rank 0");
    if (c.testExitAfterRingReport) std::_Exit(3);  // tests: gone between its report and its traits
    sendTraits(root.get(), mine, deadline, "rank 0");
    // Rank 0 may collect the reports up to a second past the deadline.
    const Error verdict = recvStatus(root.get(), deadline + std::chrono::seconds(2), "rank 0");
    if (verdict.code() != RR_SUCCESS) throw verdict;
    return recvTraits(root.get(), deadline + std::chrono::seconds(2), "rank 0");
  }
  // Every rank's report (a rank that failed sends it at once; with a failure of its own,
  // rank 0 waits only a second for the others). The verdict is the most telling failure:
  // a configuration or secret error, then a broken protocol or a failed system call, before
  // a lost, refused or timed-out connection, which is often only their consequence; among
  // equals, the lowest rank's.
  auto weight = [](rr_result_t code) {
    if (code == RR_ERR_INVALID_ARGUMENT || code == RR_ERR_AUTH) return 3;
    if (code == RR_ERR_SYSTEM || code == RR_ERR_INTERNAL) return 2;
    return code == RR_SUCCESS ? 0 : 1;
  };
  std::optional<Error> first = own;
  uint32_t all = mine;
  const Deadline reportsBy = own ? std::min(deadline, deadlineIn(1000)) : deadline;
  for (int r = 1; r < c.size; ++r) {
    std::optional<Error> e;
    try {
      const std::string who = fmt::format("rank {}", r);
      const Error report = recvStatus(ring.bootstrap[r].get(), reportsBy, who);
      if (report.code() != RR_SUCCESS)
        e = Error(report.code(), fmt::format("rank {} could not connect the ring: {}", r, report.what()));
      else
        all &= recvTraits(ring.bootstrap[r].get(), reportsBy, who);
    } catch (const Error& err) {
      e = Error(err.code(), fmt::format("rank {} did not report its ring connections: {}", r, err.what()));
    }
    if (e && (!first || weight(e->code()) > weight(first->code()))) first = e;
  }
  for (int r = 1; r < c.size; ++r) {
    if (first) {
      tryStatus(ring.bootstrap[r].get(), *first, fmt::format("rank {}", r));
    } else {
      sendStatus(ring.bootstrap[r].get(), RR_SUCCESS, "", deadline, fmt::format("rank {}", r));
      sendTraits(ring.bootstrap[r].get(), all, deadline, fmt::format("rank {}", r));
    }
  }
  if (first) throw *first;
  return all;
}

// The transport of the job's ranks of kind "either" (RR_TRANSPORT=auto; auto_transport.h),
// chosen by rank 0 from every rank's arrival: TCP where the ranks are on more than one host
// (their addresses differ; interfaces.h, sameHostAddress), or where a rank runs TCP only (it
// asked for it, or its build or host has no UCX); else UCX where every rank also shares the
// pid and IPC namespaces (UCX's shared memory needs all three), TCP otherwise. A
// rank that asked for UCX changes nothing: either ranks run UCX's shared memory only, so
// across hosts it fails at the data handshake with both transports named
// (transportMismatch), as a rank of tcp beside one of ucx does. `why` is for the log.
TransportKind jobTransport(const std::vector<Arrival>& table, std::string& why) {
  if (std::none_of(table.begin(), table.end(), [](const Arrival& a) { return a.transport == TransportKind::kEither; }))
    return TransportKind::kTcp;  // no rank reads it
  const Arrival& a = table[0];
  for (size_t r = 1; r < table.size(); ++r)
    if (!sameHostAddress(table[r].endpoint.ip, a.endpoint.ip)) {
      why = fmt::format("the ranks are on more than one host (rank 0 at {}, rank {} at {})", a.endpoint.ip, r,
                        table[r].endpoint.ip);
      return TransportKind::kTcp;
    }
  for (size_t i = 1; i <= table.size(); ++i)  // rank 0 last: it offers TCP only for another's sake too
    if (const size_t r = i % table.size(); table[r].transport == TransportKind::kTcp) {
      why = fmt::format("rank {} runs TCP only (RR_TRANSPORT=tcp, a build without UCX, or UCX could not "
                        "start there)", r);
      return TransportKind::kTcp;
    }
  for (size_t r = 1; r < table.size(); ++r) {
    const Arrival& b = table[r];
    if (b.pidNamespace != a.pidNamespace || b.ipcNamespace != a.ipcNamespace || a.pidNamespace == 0 ||
        a.ipcNamespace == 0) {
      why = fmt::format("ranks 0 and {} share IP {} but not pid and IPC namespaces (containers?), which "
                        "UCX's shared memory needs", r, a.endpoint.ip);
      return TransportKind::kTcp;
    }
  }
  const bool oneIp =
      std::all_of(table.begin(), table.end(), [&a](const Arrival& b) { return b.endpoint.ip == a.endpoint.ip; });
  why = fmt::format("all {} ranks share one host ({}, pid and IPC namespaces): UCX's shared memory", table.size(),
                    oneIp ? "IP " + a.endpoint.ip : "loopback addresses");
  return TransportKind::kUcx;
}

// At rank 0, before it listens: why the other ranks' arrivals already rule out a job on
// one host, as jobTransport would find (a rank that offers TCP only, or two ranks on two
// hosts); empty if they do not. Rank 0's own address is not known yet.
std::string notOneHost(const std::vector<Arrival>& table) {
  for (size_t r = 2; r < table.size(); ++r)
    if (!sameHostAddress(table[r].endpoint.ip, table[1].endpoint.ip))
      return fmt::format("ranks 1 and {} are on two hosts ({}, {})", r, table[1].endpoint.ip, table[r].endpoint.ip);
  for (size_t r = 1; r < table.size(); ++r)
    if (table[r].transport == TransportKind::kTcp) return fmt::format("rank {} offers TCP only", r);
  return "";
}

}  // namespace

TransportJob transportJob(const Config& c) {
  return TransportJob{c.rank, c.size, jobOf(c), c.ifname, c.connectTimeoutMs};
}

namespace {

// What the rendezvous gave this rank: where it listens (published), the job's transport, and
// whom it connects to and accepts.
struct Rendezvous {
  Endpoint self;
  TransportKind jobKind = TransportKind::kTcp;  // the job's transport, for a rank of kEither
  RingPeers peers;
};

// The partners `rank` connects to (in rdPartners order) into peers.connect's order, and
// those it accepts into peers.accept.
std::vector<int> partnersToDial(const Config& c, RingPeers& peers) {
  std::vector<int> dial;
  for (int p : rdPartners(c.rank, c.size)) {
    if (rdConnects(c.rank, p))
      dial.push_back(p);
    else
      peers.accept.push_back(p);
  }
  return dial;
}

// Rank 0: gathers every rank's arrival, compares the job-wide settings (a difference fails
// init on every rank, named), chooses the job's transport, and answers each rank with what
// it needs: the job's size and transport, its right neighbour's endpoint and those of the
// partners it connects to (O(n log n) bytes in all).
Rendezvous hostRendezvous(const Config& c, Ring& ring, Transport& transport, Deadline deadline, spdlog::logger& log) {
  Rendezvous rv;
  const std::vector<int> dial = partnersToDial(c, rv.peers);
  std::vector<Arrival> table(c.size);
  reserveFds(c.size + 64, log);
  Fd listener = listenOn(resolve(c.addr, "RR_ADDR"), SOMAXCONN);
  ring.bootstrap = gatherRanks(c, listener.get(), table, deadline, log);
  rv.self = transport.listen(Route{localAddr(ring.bootstrap[1].get()).ip(), notOneHost(table)});
  table[0] = arrivalHere(rv.self, transport.kind(), c.jobSettings());
  std::string why;
  rv.jobKind = jobTransport(table, why);
  // Every rank runs what it must (ucx, tcp) where none runs either.
  const TransportKind runs = why.empty() && table[0].transport != TransportKind::kEither ? table[0].transport : rv.jobKind;
  if (const std::string differ = settingsMismatch(table, runs); !differ.empty()) {
    const Error failure(RR_ERR_INVALID_ARGUMENT, differ);
    const std::string m = encodeJobFailed(failure);
    for (int r = 1; r < c.size; ++r) {
      try {
        sendAll(ring.bootstrap[r].get(), m.data(), m.size(), deadlineIn(500), fmt::format("rank {}", r));
      } catch (const Error&) {  // best effort: that rank may be gone
      }
    }
    throw failure;
  }
  if (!why.empty()) log.info("RR_TRANSPORT=auto: {}, because {}", rv.jobKind == TransportKind::kUcx ? "ucx" : "tcp", why);
  for (int r = 1; r < c.size; ++r) {
    std::vector<Endpoint> partners;
    for (int p : rdPartners(r, c.size))
      if (rdConnects(r, p)) partners.push_back(table[static_cast<size_t>(p)].endpoint);
    const std::string verdict =
        encodeVerdict(c.size, rv.jobKind, table[static_cast<size_t>((r + 1) % c.size)].endpoint, partners);
    sendAll(ring.bootstrap[r].get(), verdict.data(), verdict.size(), deadline, fmt::format("rank {}", r));
  }
  rv.peers.right = table[static_cast<size_t>((c.rank + 1) % c.size)].endpoint;
  for (int p : dial) rv.peers.connect.emplace_back(p, table[static_cast<size_t>(p)].endpoint);
  return rv;
}

// Any other rank: joins rank 0's rendezvous (the handshake, its arrival, or why it cannot
// join) and reads its answer.
Rendezvous joinRendezvous(const Config& c, Ring& ring, Transport& transport, Deadline deadline) {
  Rendezvous rv;
  const std::vector<int> dial = partnersToDial(c, rv.peers);
  Fd root = connectTo(resolve(c.addr, "RR_ADDR"), deadline, "rank 0 (RR_ADDR)");
  handshakeClient(root.get(), jobOf(c), Hello{LinkRole::kBootstrap, c.rank, c.size, 0, 0}, deadline,
                  fmt::format("rank 0 at {}", c.addr));
  try {
    const std::string rankZero = peerAddr(root.get()).ip();
    rv.self = transport.listen(Route{localAddr(root.get()).ip(),
                                     isAddressHere(rankZero) ? "" : fmt::format("rank 0 is on another host (its "
                                     "address {} is none of this network namespace's)", rankZero)});
    sendArrival(root.get(), arrivalHere(rv.self, transport.kind(), c.jobSettings()), deadline, "rank 0");
  } catch (const Error& e) {
    sendJoinError(root.get(), e);  // rank 0 and every other rank hear why
    throw;
  }
  // Rank 0 answers at its own deadline at the latest, which may come a little after ours.
  const Deadline answerBy = deadline + std::chrono::seconds(2);
  uint8_t n[4];
  recvAll(root.get(), n, 4, answerBy, "rank 0");
  if (wire::get32(n) == 0) {  // the job cannot form; rank 0 says why
    const Error e = recvStatus(root.get(), answerBy, "rank 0");
    fail(e.code(), "rank {}: the job cannot form: {} (reported by rank 0)", c.rank, e.what());
  }
  if (wire::get32(n) != static_cast<uint32_t>(c.size))
    fail(RR_ERR_SYSTEM, "protocol error: rank 0 sent a job of {} ranks, expected {}", wire::get32(n), c.size);
  rv.jobKind = recvJobTransport(root.get(), answerBy, "rank 0");
  rv.peers.right = recvEndpoint(root.get(), answerBy, "rank 0");
  for (int p : dial) rv.peers.connect.emplace_back(p, recvEndpoint(root.get(), answerBy, "rank 0"));
  ring.bootstrap.push_back(std::move(root));
  return rv;
}

}  // namespace

Ring connectRing(const Config& c, Transport& transport, EventSet& events, spdlog::logger& log) {
  Ring ring;
  if (c.size == 1) return ring;
  const Deadline deadline = deadlineIn(c.connectTimeoutMs);
  const Rendezvous rv = c.rank == 0 ? hostRendezvous(c, ring, transport, deadline, log)
                                    : joinRendezvous(c, ring, transport, deadline);
  if (c.testExitInRingSetup) std::_Exit(3);  // tests: a rank that dies during ring setup

  std::optional<Error> failed;
  try {
    if (transport.kind() == TransportKind::kEither) {
      transport.choose(rv.jobKind);
      log.info("RR_TRANSPORT=auto: the job runs over {}", transport.name());
    }
    ring.links = transport.connectRing(rv.peers, events, deadline);
  } catch (const Error& e) {
    failed = e;
  }
  const uint32_t traits = agreeOnRing(c, ring, failed, deadline, rv.self, rv.peers);
  ring.largeFrames = (traits & kTraitLargeFrames) != 0;
  ring.oneHost = (traits & kTraitOneHost) != 0;
  ring.fragmentFrames = (traits & kTraitFragmentFrames) != 0;
  return ring;
}

}  // namespace rr
