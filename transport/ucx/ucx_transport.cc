// UcxTransport; see ucx_transport.h.
#include "transport/ucx/ucx_transport.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

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
};

// Each side of an authenticated connection sends its worker address and the key the other
// side must use; small enough that both may send before either reads.
void sendInfo(int fd, const std::string& address, uint32_t key, Deadline deadline, const std::string& who) {
  std::string m(4 + address.size() + 4, '\0');
  auto* p = reinterpret_cast<uint8_t*>(m.data());
  wire::put32(p, static_cast<uint32_t>(address.size()));
  std::memcpy(p + 4, address.data(), address.size());
  wire::put32(p + 4 + address.size(), key);
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
  uint8_t key[4];
  recvAll(fd, key, 4, deadline, who);
  info.key = wire::get32(key);
  return info;
}

uint32_t randomKey() {
  std::random_device rd;
  return static_cast<uint32_t>(rd());
}

}  // namespace

UcxTransport::UcxTransport(TransportJob job, spdlog::logger& log)
    : job_(std::move(job)), log_(log) {}

UcxTransport::~UcxTransport() = default;

Endpoint UcxTransport::listen(const std::string& routeIp) {
  // After this rank reached rank 0: a UCX that cannot start (UCX_TLS naming nothing usable)
  // is then a reason rank 0 hears and tells every rank, and UCX's start-up time does not
  // delay this rank's arrival at the rendezvous.
  worker_ = std::make_shared<UcxWorker>();
  const std::string ip = chooseListenIp(job_.rank, job_.ifname, routeIp, log_);
  listener_ = listenOn(makeAddr(ip, 0), 16);
  return Endpoint{ip, localAddr(listener_.get()).port()};
}

// The left neighbour's connection for the address exchange (one, role kUcx).
Fd UcxTransport::acceptLeft(Deadline deadline) {
  const int left = (job_.rank - 1 + job_.size) % job_.size;
  Fd got;
  bool claimed = false;
  std::string fatal;
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    if (std::string why = transportMismatch(h, LinkRole::kUcx, job_.rank); !why.empty())
      return fatal = why;
    if (h.role != LinkRole::kUcx) return "a bootstrap connection sent to a data port";
    if (h.rank != left || h.size != job_.size)
      return fmt::format("rank {} (size {}) connected, expected left neighbour rank {}", h.rank,
                         h.size, left);
    if (claimed) return fmt::format("rank {} is connected already", h.rank);
    claimed = true;
    return "";
  };
  cb.commit = [&](const Hello&, Fd fd) { got = std::move(fd); };
  cb.release = [&](const Hello&) { claimed = false; };
  cb.done = [&] { return static_cast<bool>(got) || !fatal.empty(); };
  cb.full = [&](const Hello& h) {
    return fatal.empty() ? fmt::format("rank {} is connected already", h.rank) : fatal;
  };
  AcceptStats stats = acceptConcurrently(listener_.get(), job_.identity, deadline, cb, log_, "ucx address port");
  if (!fatal.empty()) fail(RR_ERR_INVALID_ARGUMENT, "rank {}: {}", job_.rank, fatal);
  if (!got)
    fail(missingPeerCode(stats), "rank {}: left neighbour rank {} did not connect within {} ms {}",
         job_.rank, left, job_.connectTimeoutMs, rejectionSummary(stats));
  return got;
}

RingLinks UcxTransport::connectRing(const Endpoint& rightEnd, EventSet& events, Deadline deadline) {
  const int right = (job_.rank + 1) % job_.size;
  const int left = (job_.rank - 1 + job_.size) % job_.size;
  const std::string leftName = fmt::format("rank {} (left neighbour)", left);
  const std::string rightName = fmt::format("rank {} (right neighbour)", right);
  Fd leftFd, rightFd;
  std::exception_ptr acceptError;
  std::thread acceptor([&] {
    try {
      leftFd = acceptLeft(deadline);
    } catch (...) {
      acceptError = std::current_exception();
    }
  });
  try {
    const SockAddr addr = makeAddr(rightEnd.ip, rightEnd.port);
    rightFd = connectTo(addr, deadline, rightName);
    handshakeClient(rightFd.get(), job_.identity,
                    Hello{LinkRole::kUcx, job_.rank, job_.size, 0, 1}, deadline,
                    fmt::format("{} at {}", rightName, addr.str()));
  } catch (...) {
    ::shutdown(listener_.get(), SHUT_RDWR);  // unblocks the acceptor's poll
    acceptor.join();
    throw;
  }
  acceptor.join();
  if (acceptError) std::rethrow_exception(acceptError);
  listener_.reset();

  // Worker addresses and keys, both ways on both connections.
  const std::string self = worker_->address();
  const uint32_t leftKey = randomKey(), rightKey = randomKey();  // what each neighbour must use
  sendInfo(rightFd.get(), self, rightKey, deadline, rightName);
  sendInfo(leftFd.get(), self, leftKey, deadline, leftName);
  const PeerInfo fromRight = recvInfo(rightFd.get(), deadline, rightName);
  const PeerInfo fromLeft = recvInfo(leftFd.get(), deadline, leftName);

  worker_->attach(events);
  RingLinks links;
  auto l = std::make_unique<UcxLink>(worker_, fromLeft.address, fromLeft.key, leftKey,
                                     std::move(leftFd), events, left, leftName);
  auto r = std::make_unique<UcxLink>(worker_, fromRight.address, fromRight.key, rightKey,
                                     std::move(rightFd), events, right, rightName);

  // One message each way on each link: UCX connects lazily, and a path it cannot make must
  // fail init, named, not the first collective.
  uint64_t ping[4] = {1, 1, 0, 0};
  l->postRecv(&ping[2], 8, FrameType::kData);
  r->postRecv(&ping[3], 8, FrameType::kData);
  l->postSend(&ping[0], 8, FrameType::kData);
  r->postSend(&ping[1], 8, FrameType::kData);
  while (l->sendsDone() < 1 || r->sendsDone() < 1 || l->recvsDone() < 1 || r->recvsDone() < 1) {
    const bool moved = l->progress() | r->progress();
    if (Clock::now() >= deadline)
      fail(RR_ERR_TIMEOUT,
           "rank {}: UCX could not pass a message to and from both neighbours (ranks {} and {}) "
           "within {} ms; lanes to the right: {}; check UCX_TLS and UCX_NET_DEVICES",
           job_.rank, left, right, job_.connectTimeoutMs, r->lanes());
    if (!moved) std::this_thread::yield();
  }
  log_.info("ring connected over ucx: left rank {} over {}; right rank {} over {}{}", left,
            l->lanes(), right, r->lanes(),
            l->peerFailureHandling() && r->peerFailureHandling()
                ? ""
                : " (without UCX peer failure handling on these lanes: a lost peer is seen by "
                  "its closed address connection)");
  links.left = std::move(l);
  links.right = std::move(r);
  return links;
}

std::string UcxTransport::describeResources() {
  UcxWorker probe;
  return fmt::format("transports {}{}", probe.transports(),
                     probe.peerFailureHandling() ? "" : " (shared memory only: eager messages, no peer "
                                                        "failure handling; a lost peer is seen by its "
                                                        "closed address connection)");
}

}  // namespace rr
