// UcxTransport; see ucx_transport.h.
#include "transport/ucx/ucx_transport.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <thread>
#include <vector>

#include "transport/error.h"
#include "transport/interfaces.h"
#include "transport/tcp/acceptor.h"
#include "transport/ucx/ucx_link.h"
#include "transport/wire.h"

namespace rr {
namespace {

constexpr size_t kMaxAddress = 64 * 1024;  // a UCP worker address (a few hundred bytes here)

struct PeerInfo {
  std::string address;  // the peer's UCP worker address
  uint32_t key = 0;     // what this rank must put in the tags it sends the peer
  uint32_t pid = 0;     // the peer's process, for pulls (ucx_link.h)
  bool canPull = false; // the peer can read this rank's memory (UcxWorker::pullCapable)
  uint64_t pidNamespace = 0;
};

// Each side of an authenticated connection sends its worker address, the key the other
// side must use, its pid, whether it can pull, and its pid namespace; small enough that
// both may send before either reads.
void sendInfo(int fd, const std::string& address, uint32_t key, bool canPull, uint64_t pidNs, Deadline deadline,
              const std::string& who) {
  std::string m(4 + address.size() + 4 + 16, '\0');
  auto* p = reinterpret_cast<uint8_t*>(m.data());
  wire::put32(p, static_cast<uint32_t>(address.size()));
  std::memcpy(p + 4, address.data(), address.size());
  p += 4 + address.size();
  wire::put32(p, key);
  wire::put32(p + 4, static_cast<uint32_t>(::getpid()));
  wire::put32(p + 8, canPull ? 1 : 0);
  wire::put64(p + 12, pidNs);
  sendAll(fd, m.data(), m.size(), deadline, who);
}

PeerInfo recvInfo(int fd, Deadline deadline, const std::string& who) {
  uint8_t head[4];
  recvAll(fd, head, 4, deadline, who);
  const uint32_t len = wire::get32(head);
  if (len == 0 || len > kMaxAddress)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent a UCX worker address of {} bytes", who, len);
  PeerInfo info;
  info.address.resize(len);
  recvAll(fd, info.address.data(), len, deadline, who);
  uint8_t tail[20];
  recvAll(fd, tail, sizeof tail, deadline, who);
  info.key = wire::get32(tail);
  info.pid = wire::get32(tail + 4);
  info.canPull = wire::get32(tail + 8) == 1;
  info.pidNamespace = wire::get64(tail + 12);
  return info;
}

uint32_t randomKey() {
  std::random_device rd;
  return static_cast<uint32_t>(rd());
}

}  // namespace

UcxTransport::UcxTransport(TransportJob job, spdlog::logger& log, bool sharedMemory)
    : job_(std::move(job)), log_(log), sharedMemory_(sharedMemory) {}

UcxTransport::~UcxTransport() = default;

Endpoint UcxTransport::listen(const Route& route) {
  // After this rank reached rank 0: a UCX that cannot start (UCX_TLS naming nothing usable)
  // is then a reason rank 0 hears and tells every rank, and UCX's start-up time does not
  // delay this rank's arrival at the rendezvous.
  startWorker();
  const std::string ip = chooseListenIp(job_.rank, job_.ifname, route.ip, log_);
  listener_ = listenOn(makeAddr(ip, 0), 16);
  return Endpoint{ip, localAddr(listener_.get()).port()};
}

void UcxTransport::startWorker() { worker_ = std::make_shared<UcxWorker>(job_.rank, sharedMemory_); }

// The connections for the address exchange (one per link, role kUcx).
Fd UcxTransport::acceptPeers(const std::vector<int>& accept, std::map<int, Fd>& partners, Deadline deadline) {
  const int left = (job_.rank - 1 + job_.size) % job_.size;
  Fd got;
  bool claimed = false;
  PartnerAdmission admitted(accept, job_.size);
  std::string fatal;
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    if (std::string why = transportMismatch(h, LinkRole::kUcx, job_.rank); !why.empty())
      return fatal = why;
    if (h.role != LinkRole::kUcx) return "a bootstrap connection sent to a data port";
    if (h.index == kPartnerLink) return admitted.admit(h);
    if (h.rank != left || h.size != job_.size)
      return fmt::format("rank {} (size {}) connected, expected left neighbour rank {}", h.rank,
                         h.size, left);
    if (claimed) return fmt::format("rank {} is connected already", h.rank);
    claimed = true;
    return "";
  };
  cb.commit = [&](const Hello& h, Fd fd) {
    if (h.index == kPartnerLink)
      admitted.commit(h.rank, std::move(fd));
    else
      got = std::move(fd);
  };
  cb.release = [&](const Hello& h) {
    if (h.index == kPartnerLink)
      admitted.release(h.rank);
    else
      claimed = false;
  };
  cb.done = [&] { return (static_cast<bool>(got) && admitted.complete()) || !fatal.empty(); };
  cb.full = [&](const Hello& h) {
    return fatal.empty() ? fmt::format("rank {} is connected already", h.rank) : fatal;
  };
  AcceptStats stats = acceptConcurrently(listener_.get(), job_.identity, deadline, cb, log_, "ucx address port");
  if (!fatal.empty()) fail(RR_ERR_INVALID_ARGUMENT, "rank {}: {}", job_.rank, fatal);
  if (!got)
    fail(missingPeerCode(stats), "rank {}: left neighbour rank {} did not connect within {} ms {}",
         job_.rank, left, job_.connectTimeoutMs, rejectionSummary(stats));
  partners = admitted.take(job_.rank, stats, job_.connectTimeoutMs);
  return got;
}

RingLinks UcxTransport::connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) {
  const int right = (job_.rank + 1) % job_.size;
  const int left = (job_.rank - 1 + job_.size) % job_.size;
  const std::string leftName = fmt::format("rank {} (left neighbour)", left);
  const std::string rightName = fmt::format("rank {} (right neighbour)", right);
  auto partnerName = [](int p) { return fmt::format("rank {} (recursive doubling partner)", p); };
  Fd leftFd, rightFd;
  std::map<int, Fd> partnerFds;
  std::exception_ptr acceptError;
  std::thread acceptor([&] {
    try {
      leftFd = acceptPeers(peers.accept, partnerFds, deadline);
    } catch (...) {
      acceptError = std::current_exception();
    }
  });
  std::map<int, Fd> connected;
  try {
    auto dial = [&](const Endpoint& end, const std::string& who, uint16_t index) {
      const SockAddr addr = makeAddr(end.ip, end.port);
      Fd fd = connectTo(addr, deadline, who);
      handshakeClient(fd.get(), job_.identity, Hello{LinkRole::kUcx, job_.rank, job_.size, index, 1}, deadline,
                      fmt::format("{} at {}", who, addr.str()));
      return fd;
    };
    rightFd = dial(peers.right, rightName, 0);
    for (const auto& [partner, end] : peers.connect) connected[partner] = dial(end, partnerName(partner), kPartnerLink);
  } catch (...) {
    ::shutdown(listener_.get(), SHUT_RDWR);  // unblocks the acceptor's poll
    acceptor.join();
    throw;
  }
  acceptor.join();
  if (acceptError) std::rethrow_exception(acceptError);
  listener_.reset();

  partnerFds.merge(connected);

  // Worker addresses and keys, both ways on every connection (all sent before any is read).
  struct Pending {
    int rank;
    Fd fd;
    std::string name;
    uint32_t key;  // what the peer must use
  };
  std::vector<Pending> pending;
  pending.push_back({left, std::move(leftFd), leftName, randomKey()});
  pending.push_back({right, std::move(rightFd), rightName, randomKey()});
  for (auto& [partner, fd] : partnerFds) pending.push_back({partner, std::move(fd), partnerName(partner), randomKey()});
  const std::string self = worker_->address();
  const uint64_t ownNamespace = namespaceInode("pid");  // a pid names one process only within it
  for (const Pending& p : pending)
    sendInfo(p.fd.get(), self, p.key, worker_->pullCapable(), ownNamespace, deadline, p.name);
  worker_->attach(events);
  std::vector<std::unique_ptr<UcxLink>> made;
  for (Pending& p : pending) {
    const PeerInfo info = recvInfo(p.fd.get(), deadline, p.name);
    // Pulls both ways or neither: each end decides from the same three facts.
    const bool pull = worker_->pullCapable() && info.canPull && ownNamespace != 0 &&
                      info.pidNamespace == ownNamespace;
    made.push_back(std::make_unique<UcxLink>(worker_, info.address, info.key, p.key, std::move(p.fd), events,
                                             p.rank, p.name, static_cast<int>(info.pid), pull));
  }

  // One message each way on each link: UCX connects lazily, and a path it cannot make must
  // fail init, named, not the first collective.
  std::vector<uint64_t> ping(2 * made.size(), 1);
  for (size_t i = 0; i < made.size(); ++i) made[i]->postRecv(&ping[made.size() + i], 8, FrameType::kData);
  for (size_t i = 0; i < made.size(); ++i) made[i]->postSend(&ping[i], 8, FrameType::kData);
  for (;;) {
    bool moved = false, done = true;
    for (auto& link : made) {
      moved |= link->progress();
      done = done && link->sendsDone() >= 1 && link->recvsDone() >= 1;
    }
    if (done) break;
    if (Clock::now() >= deadline) {
      std::string stuck;
      for (auto& link : made)
        if (link->sendsDone() < 1 || link->recvsDone() < 1)
          stuck += fmt::format("{}rank {} (lanes: {})", stuck.empty() ? "" : ", ", link->peerRank(), link->lanes());
      fail(RR_ERR_TIMEOUT,
           "rank {}: UCX could not pass a message to and from {} within {} ms; check UCX_TLS and "
           "UCX_NET_DEVICES", job_.rank, stuck, job_.connectTimeoutMs);
    }
    if (!moved) std::this_thread::yield();
  }
  bool handling = true;
  for (auto& link : made) handling = handling && link->peerFailureHandling();
  log_.info("ring connected over ucx: left rank {} over {}; right rank {} over {}; {} recursive doubling "
            "partner{}{}{}", left, made[0]->lanes(), right, made[1]->lanes(), made.size() - 2,
            made.size() == 3 ? "" : "s",
            handling ? ""
                     : " (without UCX peer failure handling on these lanes: a lost peer is seen by "
                       "its closed address connection)",
            made[0]->pullSends() ? fmt::format("; data frames of {} KiB and more are read from the sender's "
                                               "memory (one copy)", UcxLink::kPullMinBytes >> 10)
                                 : std::string());
  if (worker_->sharedFifo() != 0)
    log_.info("UCX's shared-memory FIFO has {} elements (UCX_MM_FIFO_SIZE sets it)", worker_->sharedFifo());
  if (worker_->sharedRxGrow() != 0)
    log_.info("UCX's shared-memory receive buffers grow {} at a time (UCX_MM_RX_BUFS_GROW sets it)",
              worker_->sharedRxGrow());
  RingLinks links;
  links.left = std::move(made[0]);
  links.right = std::move(made[1]);
  for (size_t i = 2; i < made.size(); ++i) links.partners.push_back(std::move(made[i]));
  return links;
}

std::string UcxTransport::describeResources() {
  UcxWorker probe;
  if (probe.peerFailureHandling()) return fmt::format("transports {}", probe.transports());
  return fmt::format("transports {} (shared memory only: {}, no peer failure handling; a lost peer is seen by "
                     "its closed address connection)",
                     probe.transports(),
                     probe.pullCapable()
                         ? fmt::format("data frames of {} KiB and more read from the sender's memory, smaller "
                                       "ones eager", UcxLink::kPullMinBytes >> 10)
                         : std::string("eager messages"));
}

}  // namespace rr
