// UcxTransport; see ucx_transport.h.
#include "transport/ucx/ucx_transport.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "transport/interfaces.h"
#include "transport/tcp/acceptor.h"
#include "base/test_lies.h"
#include "transport/ucx/ucx_link.h"
#include "base/wire.h"

namespace rr {
namespace {

constexpr size_t kMaxAddress = 64 * 1024;  // a UCP worker address (a few hundred bytes here)

using PeerInfo = UcxTransport::PeerInfo;

// The proof that a pid is the peer's own process, before this rank reads from it: each
// rank writes, in its own memory, for each link, {magic, its rank, the peer's rank, the
// job id, a random nonce}, and announces the address and the nonce over the authenticated
// connection; the peer reads those bytes from the pid it was given and compares. Only the
// process that announced them holds them: a rank that names another process (the peer's
// own, a third one) fails init, and nothing is ever pulled from it (docs/design.md,
// "The trust model").
constexpr uint32_t kProofMagic = 0x52525046;  // "RRPF"
constexpr size_t kProofBytes = 40;
using PullProof = std::array<uint8_t, kProofBytes>;

PullProof makeProof(int writer, int reader, uint64_t jobId, const std::array<uint8_t, 16>& nonce) {
  PullProof p{};
  wire::put32(p.data(), kProofMagic);
  wire::put32(p.data() + 4, static_cast<uint32_t>(writer));
  wire::put32(p.data() + 8, static_cast<uint32_t>(reader));
  wire::put64(p.data() + 16, jobId);
  std::memcpy(p.data() + 24, nonce.data(), nonce.size());
  return p;
}

constexpr size_t kInfoTail = 4 + 4 + 4 + 8 + 8 + 16;  // key, pid, can pull, pid namespace, proof address, nonce

// Each side of an authenticated connection sends its worker address, the key the other
// side must use, its pid, whether it can pull, its pid namespace and where its proof for
// this link is; small enough that both may send before either reads.
void sendInfo(int fd, const std::string& address, uint32_t key, uint32_t pid, bool canPull, uint64_t pidNs,
              const PullProof* proof, const std::array<uint8_t, 16>& nonce, Deadline deadline, const std::string& who) {
  std::string m(4 + address.size() + kInfoTail, '\0');
  auto* p = reinterpret_cast<uint8_t*>(m.data());
  wire::put32(p, static_cast<uint32_t>(address.size()));
  std::memcpy(p + 4, address.data(), address.size());
  p += 4 + address.size();
  wire::put32(p, key);
  wire::put32(p + 4, pid);
  wire::put32(p + 8, canPull ? 1 : 0);
  wire::put64(p + 12, pidNs);
  wire::put64(p + 20, reinterpret_cast<uintptr_t>(proof));
  std::memcpy(p + 28, nonce.data(), nonce.size());
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
  uint8_t tail[kInfoTail];
  recvAll(fd, tail, sizeof tail, deadline, who);
  info.key = wire::get32(tail);
  info.pid = wire::get32(tail + 4);
  info.canPull = wire::get32(tail + 8) == 1;
  info.pidNamespace = wire::get64(tail + 12);
  info.proofAddress = wire::get64(tail + 20);
  std::memcpy(info.nonce.data(), tail + 28, info.nonce.size());
  return info;
}

// Before any pull from the peer: its pid is proven to be its process (PullProof). Throws
// RR_ERR_AUTH naming the peer where it is not, RR_ERR_SYSTEM where the kernel refuses the
// read (then UCX's cma would fail as well).
void verifyPeerProcess(const PeerInfo& info, int peer, int self, uint64_t jobId, const std::string& who) {
  if (info.pid == 0 || static_cast<pid_t>(info.pid) == ::getpid())
    fail(RR_ERR_AUTH, "{} named process {} as its own, which is {}: it cannot be read from", who, info.pid,
         info.pid == 0 ? "no process" : "this rank's own process");
  const PullProof want = makeProof(peer, self, jobId, info.nonce);
  PullProof got{};
  iovec local{got.data(), got.size()};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(info.proofAddress)), got.size()};
  const ssize_t n = ::process_vm_readv(static_cast<pid_t>(info.pid), &local, 1, &remote, 1, 0);
  if (n < 0 && errno == EPERM)
    fail(RR_ERR_SYSTEM,
         "reading {}'s proof of its process {} was refused by the kernel (EPERM): this process may not read its "
         "memory (ptrace restrictions, or another user); leave cma out of UCX_TLS (UCX_TLS=posix,sysv,self) to "
         "send through shared-memory queues instead", who, info.pid);
  // One message whatever went wrong (no such process, an unmapped address, other bytes):
  // a liar learns nothing about the process it named.
  if (n != static_cast<ssize_t>(got.size()) || CRYPTO_memcmp(got.data(), want.data(), got.size()) != 0)
    fail(RR_ERR_AUTH, "{} named process {} as its own, but that process does not hold its proof: frames are never "
         "read from a process that is not the peer's", who, info.pid);
}

// A UCP worker address this UCX can hand to ucp_ep_create. UCX's parser trusts the
// address: its first byte's low 4 bits are the address format's version, and a version it
// does not know stops the process on an assertion (address.c); a structure cut short is
// read past its end. UCX's public headers say nothing of the format, so the version is
// checked against the two UCX knows (ucp_object_version_t in its internal ucp_types.h:
// V1 = 0 and V2 = 1, in 1.13 as in its later releases), and the copy given to UCX ends in
// bytes that close every list of the format (0x80: an empty device, the last one), inside
// this copy. Throws naming the peer.
constexpr unsigned kUcxAddressVersions = 2;

std::string checkedWorkerAddress(const std::string& address, const std::string& who) {
  const unsigned version = static_cast<uint8_t>(address[0]) & 0x0f;
  if (address.size() < 2 || version >= kUcxAddressVersions)
    fail(RR_ERR_SYSTEM, "{} sent a UCX worker address this UCX cannot read (format version {}, {} bytes; this UCX "
         "reads versions up to {}: the ranks' UCX versions differ, or the peer broke the protocol)",
         who, version, address.size(), kUcxAddressVersions - 1);
  std::string padded = address;
  padded.append(256, static_cast<char>(0x80));
  return padded;
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
  listener_ = listenOn(makeAddr(ip, 0), 64);
  return Endpoint{ip, localAddr(listener_.get()).port()};
}

void UcxTransport::startWorker() {
  worker_ = std::make_shared<UcxWorker>(job_.rank, sharedMemory_);
  worker_->setLog(&log_);
}

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
      return dialPeer(addr, job_.identity, Hello{LinkRole::kUcx, job_.rank, job_.size, index, 1}, deadline, who);
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
  std::vector<Exchange> pending;
  auto add = [&](int rank, Fd fd, std::string name) {
    Exchange p{rank, std::move(fd), std::move(name), randomKey(), {}, {}, false};
    if (RAND_bytes(p.nonce.data(), static_cast<int>(p.nonce.size())) != 1)
      fail(RR_ERR_SYSTEM, "OpenSSL RAND_bytes failed to produce a nonce");
    pending.push_back(std::move(p));
  };
  add(left, std::move(leftFd), leftName);
  add(right, std::move(rightFd), rightName);
  for (auto& [partner, fd] : partnerFds) add(partner, std::move(fd), partnerName(partner));
  exchangeAddresses(pending, deadline);
  worker_->attach(events);
  std::vector<std::unique_ptr<UcxLink>> made;
  for (Exchange& p : pending)
    made.push_back(std::make_unique<UcxLink>(worker_, p.info.address, p.info.key, p.key,
                                             std::move(p.fd), events, p.rank, job_.size, p.name,
                                             static_cast<int>(p.info.pid), p.pull));

  pingLinks(made, events, deadline);
  logLinks(made);
  RingLinks links;
  links.left = std::move(made[0]);
  links.right = std::move(made[1]);
  for (size_t i = 2; i < made.size(); ++i) links.partners.push_back(std::move(made[i]));
  return links;
}

void UcxTransport::exchangeAddresses(std::vector<Exchange>& peers, Deadline deadline) {
  std::string self = worker_->address();
  if (lying("ucx-address-version")) self[0] = static_cast<char>(self[0] | 0x0f);  // tests: a version no UCX knows
  const uint64_t ownNamespace = namespaceInode("pid");  // a pid names one process only within it
  // Each link's proof lives here until its peer has said it read it (the acknowledgements
  // below), also where this rank fails meanwhile: an honest rank is never taken for a liar
  // because it let go of its proof early.
  std::vector<PullProof> proofs;
  proofs.reserve(peers.size());
  for (const Exchange& p : peers) proofs.push_back(makeProof(job_.rank, p.rank, job_.identity.jobId, p.nonce));
  // Tests: a rank that names its peer's process (or its parent's) as its own reads the
  // peer's message first to learn that pid.
  const bool claimOther = lying("ucx-pid-peer") || lying("ucx-pid-parent");
  std::optional<Error> failure;
  const auto note = [&failure](const Error& e) {
    if (!failure) failure = e;
  };
  for (size_t i = 0; i < peers.size(); ++i) {
    Exchange& p = peers[i];
    uint32_t pid = static_cast<uint32_t>(::getpid());
    if (claimOther) {
      p.info = recvInfo(p.fd.get(), deadline, p.name);
      pid = lying("ucx-pid-peer") ? p.info.pid : static_cast<uint32_t>(::getppid());
    }
    sendInfo(p.fd.get(), self, p.key, pid, worker_->pullCapable(), ownNamespace, &proofs[i], p.nonce, deadline, p.name);
  }
  std::vector<bool> heard(peers.size(), false);
  for (size_t i = 0; i < peers.size(); ++i) {
    Exchange& p = peers[i];
    try {
      if (!claimOther) p.info = recvInfo(p.fd.get(), deadline, p.name);
      heard[i] = true;
      // Pulls both ways or neither: each end decides from the same three facts, and then
      // proves its process to the other before the first frame is read.
      p.pull = worker_->pullCapable() && p.info.canPull && ownNamespace != 0 && p.info.pidNamespace == ownNamespace;
      if (p.pull) verifyPeerProcess(p.info, p.rank, job_.rank, job_.identity.jobId, p.name);
      p.info.address = checkedWorkerAddress(p.info.address, p.name);
    } catch (const Error& e) {
      note(e);
    }
  }
  // Every peer this rank heard is told that its proof was read (or needs no reading), and
  // each of them must say the same before this rank's proofs may go.
  const uint8_t read = 1;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!heard[i]) continue;
    try {
      sendAll(peers[i].fd.get(), &read, 1, deadline, peers[i].name);
    } catch (const Error& e) {
      note(e);
    }
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!heard[i]) continue;
    try {
      uint8_t byte = 0;
      recvAll(peers[i].fd.get(), &byte, 1, deadline, peers[i].name);
    } catch (const Error& e) {
      note(e);
    }
  }
  if (failure) throw *failure;
}

void UcxTransport::pingLinks(const std::vector<std::unique_ptr<UcxLink>>& made, EventSet& events, Deadline deadline) {
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
    // A peer whose process ended (its init failed) closes its address connection, which
    // the event set reports (UcxLink's sentinel): looked at, so that this rank does not
    // wait for its deadline.
    if (!moved && events.dispatch(0) == 0) std::this_thread::yield();
  }
}

void UcxTransport::logLinks(const std::vector<std::unique_ptr<UcxLink>>& made) const {
  const int right = (job_.rank + 1) % job_.size;
  const int left = (job_.rank - 1 + job_.size) % job_.size;
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
