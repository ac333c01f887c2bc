// UcxTransport: ring links over UCX's UCP layer (ucx_link.h): RDMA verbs on InfiniBand and
// RoCE, shared memory (posix, sysv, cma) between ranks of one host, TCP elsewhere, as UCX
// chooses or as UCX_TLS / UCX_NET_DEVICES say (passed through to UCX untouched).
//
//   rank r-1                       rank r                        rank r+1
//   ---- TCP, handshake (kUcx) ---> listener  ---- TCP, handshake (kUcx) ---->
//   <-- worker address + key ----> exchange  <--- worker address + key ----->
//   ==== UCP endpoint (tags) =====> UcxLink   ==== UCP endpoint (tags) ======>
//
// UCX itself authenticates nothing. Worker addresses travel only over connections that
// passed the HMAC handshake with the neighbour the rendezvous named, and each side chooses
// a random 32-bit key that the other must put in every message's tag, so a message from a
// process the rendezvous did not vouch for never matches a receive. (What UCX listens on
// at its own level, e.g. its tcp transport's port, still accepts connections; it is the
// key that keeps their messages out.) Before connectRing returns, one message crosses each
// link both ways, so a path UCX cannot make fails init, named, instead of the first
// collective. A recursive doubling partner's link is made the same way (its hello's index
// kPartnerLink; the lower rank of a pair connects), with an endpoint of its own.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transport/transport.h"

namespace rr {

class UcxLink;
class UcxWorker;

// UCX's log lines of this thread held while one lives, instead of written (to stderr, where
// the library routes them; ucx_worker.cc): for a start of UCX whose failure is not the
// user's error (RR_TRANSPORT=auto's), which folds them into its own line. Lines of UCX's
// other threads go out as always. Not nested.
class HeldUcxLines {
 public:
  HeldUcxLines();
  ~HeldUcxLines();  // writes what is held, unless taken
  HeldUcxLines(const HeldUcxLines&) = delete;
  HeldUcxLines& operator=(const HeldUcxLines&) = delete;
  // The held lines' text, without their prefixes, joined by "; " (empty if none); they are
  // not written. Lines the user's UCX_LOG_LEVEL hides (fatal) are among them: they are
  // never written, but the library's own message may say them.
  std::string take();
  // Removes the held lines whose text contains `containing` (they are never written);
  // returns how many.
  size_t drop(std::string_view containing);

  struct Line {
    std::string prefix, text;
    bool shown;  // false: under the user's UCX_LOG_LEVEL, for take() only
  };

 private:
  std::vector<Line> lines_;
};

class UcxTransport final : public Transport {
 public:
  // sharedMemory: UCX's shared-memory transports only, unless UCX_TLS says otherwise (for
  // auto's choice, which takes UCX only where every rank shares one host).
  UcxTransport(TransportJob job, spdlog::logger& log, bool sharedMemory = false);
  ~UcxTransport() override;

  const char* name() const override { return "ucx"; }
  TransportKind kind() const override { return TransportKind::kUcx; }
  Endpoint listen(const Route& route) override;
  // listen's two steps for AutoTransport, which listens before it knows the transport and
  // starts UCX (startWorker) before the rendezvous, to learn whether UCX can start here.
  void startWorker();
  void adoptListener(Fd listener) { listener_ = std::move(listener); }
  RingLinks connectRing(const RingPeers& peers, EventSet& events, Deadline deadline) override;

  // What UCX sees on this host (devices and transports), for `ringreduce info`.
  static std::string describeResources();

 private:
  // What one link's address exchange carries: the peer's worker address, key, process and
  // its proof (ucx_transport.cc), and this rank's.
 public:
  struct PeerInfo {
    std::string address;  // the peer's UCP worker address
    uint32_t key = 0;     // what this rank must put in the tags it sends the peer
    uint32_t pid = 0;     // the peer's process, for pulls (ucx_link.h), once proven
    bool canPull = false; // the peer can read this rank's memory (UcxWorker::pullCapable)
    uint64_t pidNamespace = 0;
    uint64_t proofAddress = 0;         // where the peer's process holds its proof
    std::array<uint8_t, 16> nonce{};   // the proof's random part
  };
  struct Exchange {
    int rank;
    Fd fd;                          // the authenticated connection (the link's sentinel after)
    std::string name;
    uint32_t key;                   // what the peer must use
    std::array<uint8_t, 16> nonce;  // this rank's proof for the peer
    PeerInfo info;                  // what the peer sent
    bool pull;                      // pulls agreed on this link, the peer's process proven
  };

 private:

  // The left neighbour's connection, and one per partner in `accept` (filled in).
  Fd acceptPeers(const std::vector<int>& accept, std::map<int, Fd>& partners, Deadline deadline);
  // Every link's address exchange, all sent before any is read; where pulls are agreed, the
  // peer's process proven. Throws the first failure once every peer heard this rank has
  // said it read this rank's proof.
  void exchangeAddresses(std::vector<Exchange>& peers, Deadline deadline);
  // One message each way on each link: UCX connects lazily, and a path it cannot make must
  // fail init, named, not the first collective.
  void pingLinks(const std::vector<std::unique_ptr<UcxLink>>& made, EventSet& events, Deadline deadline);
  // What init made, at INFO: each link's lanes, pulls, UCX's buffers.
  void logLinks(const std::vector<std::unique_ptr<UcxLink>>& made) const;

  TransportJob job_;
  spdlog::logger& log_;
  bool sharedMemory_;
  std::shared_ptr<UcxWorker> worker_;
  Fd listener_;
};

}  // namespace rr
