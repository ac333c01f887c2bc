// Rendezvous through rank 0, then the ring connections; see bootstrap.h.
#include "engine/bootstrap.h"

#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/acceptor.h"
#include "transport/error.h"
#include "transport/handshake.h"
#include "transport/interfaces.h"
#include "transport/wire.h"

namespace rr {
namespace {

constexpr size_t kMaxStatusText = 4096;

struct Endpoint {
  std::string ip;
  uint16_t port = 0;
};

// A rank that reached rank 0 but cannot take part: the job cannot form.
class JoinFailed : public Error {
 public:
  using Error::Error;
};

void sendEndpoint(int fd, const Endpoint& e, Deadline deadline, const std::string& what) {
  uint8_t buf[3 + 64];
  const size_t len = std::min<size_t>(e.ip.size(), 64);
  wire::put16(buf, e.port);
  buf[2] = static_cast<uint8_t>(len);
  std::memcpy(buf + 3, e.ip.data(), len);
  sendAll(fd, buf, 3 + len, deadline, what);
}

// A status on a bootstrap connection: code u32 (RR_SUCCESS or the failure), length u32, text.
void sendStatus(int fd, rr_result_t code, const std::string& text, Deadline deadline,
                const std::string& what) {
  const std::string t = text.substr(0, kMaxStatusText);
  std::vector<uint8_t> buf(8 + t.size());
  wire::put32(buf.data(), static_cast<uint32_t>(code));
  wire::put32(buf.data() + 4, static_cast<uint32_t>(t.size()));
  std::memcpy(buf.data() + 8, t.data(), t.size());
  sendAll(fd, buf.data(), buf.size(), deadline, what);
}

Error recvStatus(int fd, Deadline deadline, const std::string& what) {
  uint8_t head[8];
  recvAll(fd, head, 8, deadline, what);
  const uint32_t code = wire::get32(head), len = wire::get32(head + 4);
  if (code > RR_ERR_INTERNAL || len > kMaxStatusText)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent a status of code {} and {} bytes", what, code, len);
  std::string text(len, '\0');
  recvAll(fd, text.data(), len, deadline, what);
  return Error(static_cast<rr_result_t>(code), text);
}

// Best effort: a failing rank tells the other end why before it closes.
void tryStatus(int fd, const Error& e, const std::string& what) {
  try {
    sendStatus(fd, e.code(), e.what(), deadlineIn(500), what);
  } catch (const Error&) {
  }
}

// Rank r -> rank 0 after the handshake: its endpoint, or (length 0) why it cannot join.
void sendJoinError(int fd, const Error& e) {
  uint8_t head[3] = {0, 0, 0};
  try {
    sendAll(fd, head, 3, deadlineIn(500), "rank 0");
  } catch (const Error&) {
    return;
  }
  tryStatus(fd, e, "rank 0");
}

Endpoint recvEndpoint(int fd, Deadline deadline, const std::string& what) {
  uint8_t head[3];
  recvAll(fd, head, 3, deadline, what);
  if (head[2] == 0) {  // the rank could not join, and says why
    const Error e = recvStatus(fd, deadline, what);
    throw JoinFailed(e.code(), fmt::format("{} cannot join: {}", what, e.what()));
  }
  if (head[2] > 64)
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
  std::mutex fatalMutex;
  std::vector<Fd> conns(c.size);
  std::vector<bool> claimed(c.size, false);
  int joined = 1;
  std::optional<Error> fatal;  // a rank that joined cannot take part
  Clock::time_point fatalAt{};
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    {
      std::lock_guard<std::mutex> lock(fatalMutex);
      if (fatal) return fatal->what();  // a latecomer hears why the job cannot form
    }
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
    try {
      table[h.rank] = recvEndpoint(fd, std::min(deadline, deadlineIn(5000)), fmt::format("rank {}", h.rank));
    } catch (const JoinFailed& e) {
      std::lock_guard<std::mutex> lock(fatalMutex);
      if (!fatal) {
        fatal = e;
        fatalAt = Clock::now();
      }
      throw;
    }
  };
  cb.commit = [&](const Hello& h, Fd fd) {
    conns[h.rank] = std::move(fd);
    ++joined;
  };
  cb.release = [&](const Hello& h) { claimed[h.rank] = false; };
  // After a fatal error, rank 0 goes on answering for a second, so that ranks still on
  // their way hear the reason instead of a refused connection.
  cb.done = [&] {
    std::lock_guard<std::mutex> lock(fatalMutex);
    return joined == c.size || (fatal && Clock::now() - fatalAt > std::chrono::seconds(1));
  };
  cb.full = [&](const Hello& h) {
    {
      std::lock_guard<std::mutex> lock(fatalMutex);
      if (fatal) return std::string(fatal->what());
    }
    if (h.size != c.size)  // the more useful reason comes first
      return fmt::format("rank {} has size {}, rank 0 has size {}", h.rank, h.size, c.size);
    return fmt::format("all {} ranks have already joined; rank {} came too late (started twice?)",
                       c.size, h.rank);
  };
  AcceptStats stats = acceptConcurrently(listenFd, jobOf(c), deadline, cb, log, "rendezvous");
  std::optional<Error> failure = fatal;
  if (!failure && joined < c.size) {
    std::string missing;
    int count = 0;
    for (int r = 1; r < c.size; ++r)
      if (!conns[r]) missing += (count++ ? ", " : "") + std::to_string(r);
    // RR_ERR_AUTH only when what kept them out was a failed proof of the secret.
    failure = Error(stats.rejected > 0 && stats.lastCode == RR_ERR_AUTH ? RR_ERR_AUTH : RR_ERR_TIMEOUT,
                    fmt::format("rendezvous at {}: {} {} did not join within {} ms ({} connection{} "
                                "rejected{}{})",
                                c.addr, count == 1 ? "rank" : "ranks", missing, c.connectTimeoutMs,
                                stats.rejected, stats.rejected == 1 ? "" : "s",
                                stats.rejected ? ", last: " : "", stats.last));
  }
  if (failure) {  // every rank that joined hears why the job cannot form
    for (int r = 1; r < c.size; ++r) {
      if (!conns[r]) continue;
      uint8_t zero[4] = {0, 0, 0, 0};  // a table of 0 ranks: a status follows
      try {
        sendAll(conns[r].get(), zero, 4, deadlineIn(500), fmt::format("rank {}", r));
      } catch (const Error&) {
        continue;
      }
      tryStatus(conns[r].get(), *failure, fmt::format("rank {}", r));
    }
    throw *failure;
  }
  return conns;
}

// Accepts the data sockets of rank `left`, in socket-index order.
std::vector<Fd> acceptLeft(const Config& c, int listenFd, int left, Deadline deadline,
                           spdlog::logger& log) {
  std::vector<Fd> socks(c.socketsPerLink);
  std::vector<bool> claimed(c.socketsPerLink, false);
  int have = 0;
  std::string fatal;  // the left neighbour is configured otherwise: the ring cannot form
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    if (h.role != LinkRole::kData) return "a bootstrap connection sent to a data port";
    if (h.rank != left || h.size != c.size)
      return fmt::format("rank {} (size {}) connected, expected left neighbour rank {}", h.rank,
                         h.size, left);
    if (h.links != c.socketsPerLink) {
      fatal = fmt::format("rank {} has RR_SOCKETS_PER_LINK={}, rank {} has {}: every rank must "
                          "use the same",
                          h.rank, h.links, c.rank, c.socketsPerLink);
      return fatal;
    }
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
  cb.done = [&] { return have == c.socketsPerLink || !fatal.empty(); };
  cb.full = [&](const Hello& h) {
    if (!fatal.empty()) return fatal;
    return fmt::format("all {} socket{} from rank {} {} already connected", c.socketsPerLink,
                       c.socketsPerLink == 1 ? "" : "s", h.rank, c.socketsPerLink == 1 ? "is" : "are");
  };
  AcceptStats stats = acceptConcurrently(listenFd, jobOf(c), deadline, cb, log, "data port");
  if (!fatal.empty()) fail(RR_ERR_INVALID_ARGUMENT, "rank {}: {}", c.rank, fatal);
  if (have < c.socketsPerLink)
    fail(stats.rejected > 0 && stats.lastCode == RR_ERR_AUTH ? RR_ERR_AUTH : RR_ERR_TIMEOUT,
         "rank {}: left neighbour rank {} connected {} of {} sockets within {} ms ({} "
         "connection{} rejected{}{})",
         c.rank, left, have, c.socketsPerLink, c.connectTimeoutMs, stats.rejected,
         stats.rejected == 1 ? "" : "s", stats.rejected ? ", last: " : "", stats.last);
  return socks;
}

// Connects this rank's two ring links: RR_SOCKETS_PER_LINK sockets to the right neighbour
// while the left neighbour's are accepted on another thread (both at once, or the ring
// would deadlock).
void connectLinks(const Config& c, RingSockets& ring, int listenFd, const std::vector<Endpoint>& table,
                  Deadline deadline, spdlog::logger& log) {
  const int right = (c.rank + 1) % c.size;
  const int left = (c.rank - 1 + c.size) % c.size;
  std::exception_ptr acceptError;
  std::thread acceptor([&] {
    try {
      ring.left = acceptLeft(c, listenFd, left, deadline, log);
    } catch (...) {
      acceptError = std::current_exception();
    }
  });
  try {
    const SockAddr addr = makeAddr(table[right].ip, table[right].port);
    const std::string who = fmt::format("rank {} (right neighbour) at {}", right, addr.str());
    for (int i = 0; i < c.socketsPerLink; ++i) {
      Fd fd = connectTo(addr, deadline, fmt::format("rank {} (right neighbour)", right));
      handshakeClient(fd.get(), jobOf(c),
                      Hello{LinkRole::kData, c.rank, c.size, static_cast<uint16_t>(i),
                            static_cast<uint16_t>(c.socketsPerLink)},
                      deadline, who);
      ring.right.push_back(std::move(fd));
    }
  } catch (...) {
    ::shutdown(listenFd, SHUT_RDWR);  // unblocks the acceptor's poll
    acceptor.join();
    throw;
  }
  acceptor.join();
  if (acceptError) std::rethrow_exception(acceptError);
  log.info("ring connected: left rank {}, right rank {} at {}:{}, {} sockets per link", left,
           right, table[right].ip, table[right].port, c.socketsPerLink);
}

// After the ring: every rank reports to rank 0 whether its links formed, and rank 0 answers
// every rank with the first failure (or success), so init fails on every rank, with the
// reason, or on none. A rank whose report does not come is a failure too.
void agreeOnRing(const Config& c, RingSockets& ring, const std::optional<Error>& own, Deadline deadline) {
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
    const Error verdict = recvStatus(root.get(), deadline, "rank 0");
    if (verdict.code() != RR_SUCCESS) throw verdict;
    return;
  }
  std::optional<Error> first = own;
  for (int r = 1; r < c.size && !first; ++r) {
    try {
      const Error e = recvStatus(ring.bootstrap[r].get(), deadline, fmt::format("rank {}", r));
      if (e.code() != RR_SUCCESS) first = Error(e.code(), fmt::format("rank {} could not connect the ring: {}", r, e.what()));
    } catch (const Error& e) {
      first = Error(e.code(), fmt::format("rank {} did not report its ring connections: {}", r, e.what()));
    }
  }
  for (int r = 1; r < c.size; ++r) {
    if (first)
      tryStatus(ring.bootstrap[r].get(), *first, fmt::format("rank {}", r));
    else
      sendStatus(ring.bootstrap[r].get(), RR_SUCCESS, "", deadline, fmt::format("rank {}", r));
  }
  if (first) throw *first;
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
    handshakeClient(root.get(), job, Hello{LinkRole::kBootstrap, c.rank, c.size, 0, 0}, deadline,
                    fmt::format("rank 0 at {}", c.addr));
    try {
      const std::string ip = chooseIp(c, root.get(), log);
      dataListener = listenOn(makeAddr(ip, 0), 64);
      sendEndpoint(root.get(), Endpoint{ip, localAddr(dataListener.get()).port()}, deadline,
                   "rank 0");
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
      fail(RR_ERR_SYSTEM, "protocol error: rank 0 sent a table of {} ranks, expected {}",
           wire::get32(n), c.size);
    for (auto& e : table) e = recvEndpoint(root.get(), deadline, "rank 0");
    ring.bootstrap.push_back(std::move(root));
  }
  if (c.testExitInRingSetup) std::_Exit(3);  // tests: a rank that dies during ring setup

  std::optional<Error> failed;
  try {
    connectLinks(c, ring, dataListener.get(), table, deadline, log);
  } catch (const Error& e) {
    failed = e;
  }
  agreeOnRing(c, ring, failed, deadline);
  return ring;
}

}  // namespace rr
