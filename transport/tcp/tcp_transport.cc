// TcpTransport; see tcp_transport.h.
#include "transport/tcp/tcp_transport.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <exception>
#include <thread>
#include <vector>

#include "base/error.h"
#include "transport/interfaces.h"
#include "transport/tcp/acceptor.h"
#include "transport/tcp/tcp_link.h"

namespace rr {

TcpTransport::TcpTransport(TransportJob job, int socketsPerLink, spdlog::logger& log)
    : job_(std::move(job)), socketsPerLink_(socketsPerLink), log_(log) {}

Endpoint TcpTransport::listen(const Route& route) {
  const std::string ip = chooseListenIp(job_.rank, job_.ifname, route.ip, log_);
  listener_ = listenOn(makeAddr(ip, 0), 64);
  self_ = Endpoint{ip, localAddr(listener_.get()).port()};
  return self_;
}

std::vector<Fd> TcpTransport::acceptPeers(const std::vector<int>& accept, std::map<int, Fd>& partners,
                                          Deadline deadline) {
  const int left = (job_.rank - 1 + job_.size) % job_.size;
  const int want = socketsPerLink_;
  std::vector<Fd> socks(static_cast<size_t>(want));
  std::vector<bool> claimed(static_cast<size_t>(want), false);
  PartnerAdmission admitted(accept, job_.size);
  int have = 0;
  std::string fatal;  // the left neighbour is configured otherwise: the ring cannot form
  AcceptCallbacks cb;
  cb.admit = [&](const Hello& h) -> std::string {
    if (std::string why = transportMismatch(h, LinkRole::kData, job_.rank); !why.empty())
      return fatal = why;
    if (h.role != LinkRole::kData) return "a bootstrap connection sent to a data port";
    if (h.links != want) {
      fatal = fmt::format("rank {} has RR_SOCKETS_PER_LINK={}, rank {} has {}: every rank must "
                          "use the same",
                          h.rank, h.links, job_.rank, want);
      return fatal;
    }
    if (h.index == kPartnerLink) return admitted.admit(h);
    if (h.rank != left || h.size != job_.size)
      return fmt::format("rank {} (size {}) connected, expected left neighbour rank {}", h.rank,
                         h.size, left);
    if (h.index >= static_cast<uint32_t>(want) || claimed[h.index])
      return fmt::format("socket index {} is invalid or repeated (RR_SOCKETS_PER_LINK={})",
                         h.index, want);
    claimed[h.index] = true;
    return "";
  };
  cb.commit = [&](const Hello& h, Fd fd) {
    if (h.index == kPartnerLink) return admitted.commit(h.rank, std::move(fd));
    socks[h.index] = std::move(fd);
    ++have;
  };
  cb.release = [&](const Hello& h) {
    if (h.index == kPartnerLink)
      admitted.release(h.rank);
    else
      claimed[h.index] = false;
  };
  cb.done = [&] { return (have == want && admitted.complete()) || !fatal.empty(); };
  cb.full = [&](const Hello& h) {
    if (!fatal.empty()) return fatal;
    return fmt::format("all {} socket{} from rank {} {} already connected", want,
                       want == 1 ? "" : "s", h.rank, want == 1 ? "is" : "are");
  };
  AcceptStats stats = acceptConcurrently(listener_.get(), job_.identity, deadline, cb, log_, "data port");
  if (!fatal.empty()) fail(RR_ERR_INVALID_ARGUMENT, "rank {}: {}", job_.rank, fatal);
  if (have < want)
    fail(missingPeerCode(stats), "rank {}: left neighbour rank {} connected {} of {} sockets within {} ms {}",
         job_.rank, left, have, want, job_.connectTimeoutMs, rejectionSummary(stats));
  partners = admitted.take(job_.rank, stats, job_.connectTimeoutMs);
  return socks;
}

Fd TcpTransport::dial(const Endpoint& end, const std::string& who, uint16_t index, Deadline deadline) {
  const SockAddr addr = makeAddr(end.ip, end.port);
  return dialPeer(addr, job_.identity,
                  Hello{LinkRole::kData, job_.rank, job_.size, index, static_cast<uint16_t>(socketsPerLink_)},
                  deadline, who);
}

std::vector<Fd> TcpTransport::connectRight(const Endpoint& rightEnd, Deadline deadline) {
  const std::string who = fmt::format("rank {} (right neighbour)", (job_.rank + 1) % job_.size);
  std::vector<Fd> socks;
  for (int i = 0; i < socketsPerLink_; ++i) socks.push_back(dial(rightEnd, who, static_cast<uint16_t>(i), deadline));
  return socks;
}

RingLinks TcpTransport::connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) {
  const int right = (job_.rank + 1) % job_.size;
  const int left = (job_.rank - 1 + job_.size) % job_.size;
  const Endpoint& rightEnd = peers.right;
  std::vector<Fd> leftSocks, rightSocks;
  std::map<int, Fd> partnerSocks;
  std::exception_ptr acceptError;
  std::thread acceptor([&] {
    try {
      leftSocks = acceptPeers(peers.accept, partnerSocks, deadline);
    } catch (...) {
      acceptError = std::current_exception();
    }
  });
  std::map<int, Fd> connected;
  try {
    rightSocks = connectRight(rightEnd, deadline);
    for (const auto& [partner, end] : peers.connect)
      connected[partner] = dial(end, fmt::format("rank {} (recursive doubling partner)", partner), kPartnerLink, deadline);
  } catch (...) {
    ::shutdown(listener_.get(), SHUT_RDWR);  // unblocks the acceptor's poll
    acceptor.join();
    throw;
  }
  acceptor.join();
  if (acceptError) std::rethrow_exception(acceptError);
  listener_.reset();  // both neighbours and every partner are in: nobody else may connect
  log_.info("ring connected over tcp: left rank {}, right rank {} at {}:{}, {} socket{} per link; {} "
            "recursive doubling partner{}",
            left, right, rightEnd.ip, rightEnd.port, socketsPerLink_, socketsPerLink_ == 1 ? "" : "s",
            partnerSocks.size() + connected.size(), partnerSocks.size() + connected.size() == 1 ? "" : "s");
  RingLinks links;
  partnerSocks.merge(connected);
  for (auto& [partner, fd] : partnerSocks) {
    std::vector<Fd> one;
    one.push_back(std::move(fd));
    links.partners.push_back(std::make_unique<TcpLink>(std::move(one), events, partner, job_.size,
                                                       fmt::format("rank {} (recursive doubling partner)", partner)));
  }
  links.left = std::make_unique<TcpLink>(std::move(leftSocks), events, left, job_.size,
                                         fmt::format("rank {} (left neighbour)", left));
  links.right = std::make_unique<TcpLink>(std::move(rightSocks), events, right, job_.size,
                                          fmt::format("rank {} (right neighbour)", right));
  return links;
}

}  // namespace rr
