// Rendezvous through rank 0, then the ring connections; see bootstrap.h.
#include "engine/bootstrap.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <thread>

#include "engine/acceptor.h"
#include "transport/error.h"
#include "transport/handshake.h"
#include "transport/interfaces.h"
#include "transport/wire.h"

namespace rr {
namespace {

struct Endpoint {
  std::string ip;
  uint16_t port = 0;
};

void sendEndpoint(int fd, const Endpoint& e, Deadline deadline, const std::string& what) {
  uint8_t buf[3 + 64];
  const size_t len = std::min<size_t>(e.ip.size(), 64);
  wire::put16(buf, e.port);
  buf[2] = static_cast<uint8_t>(len);
  std::memcpy(buf + 3, e.ip.data(), len);
  sendAll(fd, buf, 3 + len, deadline, what);
}

Endpoint recvEndpoint(int fd, Deadline deadline, const std::string& what) {
  uint8_t head[3];
  recvAll(fd, head, 3, deadline, what);
  if (head[2] == 0 || head[2] > 64)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent an address of {} bytes", what, head[2]);
  Endpoint e;
  e.port = wire::get16(head);
  e.ip.resize(head[2]);
  recvAll(fd, e.ip.data(), head[2], deadline, what);
  makeAddr(e.ip, e.port);  // throws unless it is a numeric address
  return e;
}

// The IP this rank publishes: the chosen interface's, else the one that reaches rank 0.
std::string chooseIp(const Config& c, int routeFd, spdlog::logger& log) {
  if (!c.ifname.empty()) {
    auto found = findInterface(parseInterfaceSpec(c.ifname));
    if (!found)
      fail(RR_ERR_INVALID_ARGUMENT, "rank {}: no interface that is up matches RR_SOCKET_IFNAME='{}'",
           c.rank, c.ifname);
    log.info("using interface {} address {} (RR_SOCKET_IFNAME={})", found->name, found->ip,
             c.ifname);
    return found->ip;
  }
  std::string ip = localAddr(routeFd).ip();
  log.info("using address {} (the route to rank 0; set RR_SOCKET_IFNAME to choose)", ip);
  return ip;
}

JobIdentity jobOf(const Config& c) { return JobIdentity{c.jobId, c.secret}; }

// Rank 0: accepts every other rank, returns their bootstrap sockets (index = rank) and the
// endpoint table, its own entry filled in by the caller.
std::vector<Fd> gatherRanks(const Config& c, int listenFd, std::vector<Endpoint>& table,
                            Deadline deadline, spdlog::logger& log) {
  std::vector<Fd> conns(c.size);
  std::vector<bool> claimed(c.size, false);
  int joined = 1;
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    if (h.role != LinkRole::kBootstrap) return "a data connection sent to the rendezvous port";
    if (h.size != c.size)
      return fmt::format("rank {} has size {}, rank 0 has size {}", h.rank, h.size, c.size);
    if (h.rank < 1 || h.rank >= c.size)
      return fmt::format("rank {} is out of range 1..{}", h.rank, c.size - 1);
    if (claimed[h.rank]) return fmt::format("rank {} joined twice", h.rank);
    claimed[h.rank] = true;
    return "";
  };
  cb.prepare = [&](const Hello& h, int fd) {
    table[h.rank] = recvEndpoint(fd, std::min(deadline, deadlineIn(5000)), fmt::format("rank {}", h.rank));
  };
  cb.commit = [&](const Hello& h, Fd fd) {
    conns[h.rank] = std::move(fd);
    ++joined;
  };
  cb.release = [&](const Hello& h) { claimed[h.rank] = false; };
  cb.done = [&] { return joined == c.size; };
  cb.full = [&](const Hello& h) {
    if (h.size != c.size)  // the more useful reason comes first
      return fmt::format("rank {} has size {}, rank 0 has size {}", h.rank, h.size, c.size);
    return fmt::format("all {} ranks have already joined; rank {} came too late (started twice?)",
                       c.size, h.rank);
  };
  AcceptStats stats = acceptConcurrently(listenFd, jobOf(c), deadline, cb, log, "rendezvous");
  if (joined < c.size) {
    std::string missing;
    for (int r = 1; r < c.size; ++r)
      if (!conns[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    fail(stats.rejected > 0 ? RR_ERR_AUTH : RR_ERR_TIMEOUT,
         "rendezvous at {}: ranks {} did not join within {} ms ({} connections rejected{}{})",
         c.addr, missing, c.connectTimeoutMs, stats.rejected, stats.rejected ? ", last: " : "",
         stats.last);
  }
  return conns;
}

// Accepts the data sockets of rank `left`, in socket-index order.
std::vector<Fd> acceptLeft(const Config& c, int listenFd, int left, Deadline deadline,
                           spdlog::logger& log) {
  std::vector<Fd> socks(c.socketsPerLink);
  std::vector<bool> claimed(c.socketsPerLink, false);
  int have = 0;
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    if (h.role != LinkRole::kData) return "a bootstrap connection sent to a data port";
    if (h.rank != left || h.size != c.size)
      return fmt::format("rank {} (size {}) connected, expected left neighbour rank {}", h.rank,
                         h.size, left);
    if (h.index >= static_cast<uint32_t>(c.socketsPerLink) || claimed[h.index])
      return fmt::format("socket index {} is invalid or repeated (RR_SOCKETS_PER_LINK={})",
                         h.index, c.socketsPerLink);
    claimed[h.index] = true;
    return "";
  };
  cb.commit = [&](const Hello& h, Fd fd) {
    socks[h.index] = std::move(fd);
    ++have;
  };
  cb.release = [&](const Hello& h) { claimed[h.index] = false; };
  cb.done = [&] { return have == c.socketsPerLink; };
  cb.full = [&](const Hello& h) {
    return fmt::format("all {} sockets from rank {} are already connected", c.socketsPerLink, h.rank);
  };
  AcceptStats stats = acceptConcurrently(listenFd, jobOf(c), deadline, cb, log, "data port");
  if (have < c.socketsPerLink)
    fail(stats.rejected > 0 ? RR_ERR_AUTH : RR_ERR_TIMEOUT,
         "rank {}: left neighbour rank {} connected {} of {} sockets within {} ms ({} "
         "connections rejected{}{})",
         c.rank, left, have, c.socketsPerLink, c.connectTimeoutMs, stats.rejected,
         stats.rejected ? ", last: " : "", stats.last);
  return socks;
}

}  // namespace

RingSockets connectRing(const Config& c, spdlog::logger& log) {
  RingSockets ring;
  if (c.size == 1) return ring;
  const Deadline deadline = deadlineIn(c.connectTimeoutMs);
  const JobIdentity job = jobOf(c);
  std::vector<Endpoint> table(c.size);
  Fd dataListener;
  const SockAddr rendezvous = resolve(c.addr, "RR_ADDR");

  if (c.rank == 0) {
    Fd listener = listenOn(rendezvous, 128);
    ring.bootstrap = gatherRanks(c, listener.get(), table, deadline, log);
    const std::string ip = chooseIp(c, ring.bootstrap[1].get(), log);
    dataListener = listenOn(makeAddr(ip, 0), 64);
    table[0] = Endpoint{ip, localAddr(dataListener.get()).port()};
    for (int r = 1; r < c.size; ++r) {
      uint8_t n[4];
      wire::put32(n, static_cast<uint32_t>(c.size));
      const std::string who = fmt::format("rank {}", r);
      sendAll(ring.bootstrap[r].get(), n, 4, deadline, who);
      for (const auto& e : table) sendEndpoint(ring.bootstrap[r].get(), e, deadline, who);
    }
  } else {
    Fd root = connectTo(rendezvous, deadline, "rank 0 (RR_ADDR)");
    handshakeClient(root.get(), job, Hello{LinkRole::kBootstrap, c.rank, c.size, 0}, deadline,
                    fmt::format("rank 0 at {}", c.addr));
    const std::string ip = chooseIp(c, root.get(), log);
    dataListener = listenOn(makeAddr(ip, 0), 64);
    sendEndpoint(root.get(), Endpoint{ip, localAddr(dataListener.get()).port()}, deadline,
                 "rank 0");
    uint8_t n[4];
    recvAll(root.get(), n, 4, deadline, "rank 0");
    if (wire::get32(n) != static_cast<uint32_t>(c.size))
      fail(RR_ERR_SYSTEM, "protocol error: rank 0 sent a table of {} ranks, expected {}",
           wire::get32(n), c.size);
    for (auto& e : table) e = recvEndpoint(root.get(), deadline, "rank 0");
    ring.bootstrap.push_back(std::move(root));
  }

  const int right = (c.rank + 1) % c.size;
  const int left = (c.rank - 1 + c.size) % c.size;
  std::exception_ptr acceptError;
  std::thread acceptor([&] {
    try {
      ring.left = acceptLeft(c, dataListener.get(), left, deadline, log);
    } catch (...) {
      acceptError = std::current_exception();
    }
  });
  try {
    const SockAddr addr = makeAddr(table[right].ip, table[right].port);
    const std::string who = fmt::format("rank {} (right neighbour) at {}", right, addr.str());
    for (int i = 0; i < c.socketsPerLink; ++i) {
      Fd fd = connectTo(addr, deadline, who);
      handshakeClient(fd.get(), job,
                      Hello{LinkRole::kData, c.rank, c.size, static_cast<uint32_t>(i)}, deadline,
                      who);
      ring.right.push_back(std::move(fd));
    }
  } catch (...) {
    ::shutdown(dataListener.get(), SHUT_RDWR);  // unblocks the acceptor's poll
    acceptor.join();
    throw;
  }
  acceptor.join();
  if (acceptError) std::rethrow_exception(acceptError);
  log.info("ring connected: left rank {}, right rank {} at {}:{}, {} sockets per link", left,
           right, table[right].ip, table[right].port, c.socketsPerLink);
  return ring;
}

}  // namespace rr
