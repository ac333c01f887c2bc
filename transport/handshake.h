// The connection handshake (docs/design.md, "Wire formats"). Every connection, bootstrap or data, starts with
//
//   server -> client  challenge  magic, version, server nonce (16 bytes)
//   client -> server  hello      magic, version, role, job id, rank, size, index,
//                                client nonce, HMAC-SHA256(secret, server nonce | hello)
//   server -> client  reply      status, HMAC-SHA256(secret, client nonce | server nonce |
//                                status), reason text
//
// so both sides prove they know the job secret without sending it. The server checks magic,
// version, job id and HMAC before it looks at anything else; a failure closes the
// connection and the reason is returned to the caller to log with the peer's address.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ringreduce/ringreduce.h"
#include "base/error.h"
#include "transport/socket.h"

namespace rr {

constexpr uint32_t kMagic = 0x52524431;  // "RRD1"
// 2: the op header's flags carry the all-reduce's algorithm (engine/run/op_header.h)
// 3: the rendezvous's verdict carries the recursive doubling partners' endpoints, and
//    partners connect links of their own (kPartnerLink)
// 4: UCX neighbours' address exchange carries the process id, pid namespace and whether
//    the rank can pull (transport/ucx/ucx_transport.cc), and the ring's "formed" reports
//    and rank 0's answer carry the links' traits (engine/setup/bootstrap_wire.h); builds of
//    version 3 could not form a job with these, and now are told why at the handshake
// 5: the links' traits carry kTraitOneHost, by which auto chooses the all-reduce's
//    algorithm (engine/setup/config.h): a rank of version 4 would choose by other thresholds
// 6: a rank's arrival at the rendezvous carries its namespaces and transport, and the
//    verdict the job's transport (engine/setup/bootstrap_wire.h), by which RR_TRANSPORT=auto chooses
// 7: the arrival carries the job-wide settings, which rank 0 compares (engine/setup/config.h,
//    JobSetting); the op header's flags say whether the bucket is in GPU memory; UCX's
//    address exchange carries each rank's proof of its process (transport/ucx/ucx_transport.cc)
constexpr uint16_t kProtocolVersion = 7;

// kData: a TCP data socket; kUcx: the connection over which two UCX neighbours exchange
// their worker addresses (transport/ucx/ucx_transport.h).
enum class LinkRole : uint16_t { kBootstrap = 1, kData = 2, kUcx = 3 };

struct JobIdentity {
  uint64_t jobId = 0;
  std::string secret;
};

// Hello::index of a data or ucx connection to a recursive doubling partner (one socket),
// not to a ring neighbour.
constexpr uint16_t kPartnerLink = 0x8000;

struct Hello {
  LinkRole role = LinkRole::kBootstrap;
  int rank = 0;
  int size = 0;
  uint16_t index = 0;  // which socket of a striped link (kPartnerLink: a partner's link)
  uint16_t links = 0;  // how many sockets the sender stripes a link over (RR_SOCKETS_PER_LINK)
};                     // (index and links share the hello's 32-bit index field, low half first)

// Thrown by handshakeClient where the server closed the connection before its reply: it was
// too busy (every handshake slot taken), or dropped the connection as silent (the
// acceptor's first-byte deadline, transport/tcp/acceptor.h). Worth trying again.
class TurnedAway : public Error {
 public:
  using Error::Error;
};

// Client side: proves itself, then checks the server's proof. Throws RR_ERR_AUTH (rejected
// or bad proof), TurnedAway (RR_ERR_PEER_LOST), RR_ERR_PEER_LOST, RR_ERR_TIMEOUT.
void handshakeClient(int fd, const JobIdentity& job, const Hello& self, Deadline deadline,
                     const std::string& peerName);
// Connects to a peer's data or address port and runs the client handshake, trying again
// (with a short pause) while the peer turns the connection away, until `deadline`; an
// error after turned-away attempts says how many there were. `who` names the peer.
Fd dialPeer(const SockAddr& addr, const JobIdentity& job, const Hello& self, Deadline deadline,
            const std::string& who);

// Server side. `accept` sees a hello whose HMAC checked out and returns "" to accept it or
// the reason to reject it. Returns the hello; throws Error with the reason on rejection.
// A client that sends no byte by `firstByte` (after the challenge) is dropped (RR_ERR_TIMEOUT);
// `spoke` is called once its first byte is here.
Hello handshakeServer(int fd, const JobIdentity& job, Deadline deadline,
                      const std::function<std::string(const Hello&)>& accept,
                      Deadline firstByte = Deadline::max(), const std::function<void()>& spoke = {});

// The server side as steps without I/O, for an event-driven server: send challenge(), read
// helloBytes(), check() it (throws Error with the reason and the code; the reply to send
// is then in rejection()), decide, and send reply(). handshakeServer is these steps on a
// blocking socket.
class ServerHandshake {
 public:
  static constexpr size_t kChallengeBytes = 4 + 2 + 2 + 16;
  static constexpr size_t kHelloBytes = 4 + 2 + 2 + 8 + 4 + 4 + 4 + 16 + 32;

  explicit ServerHandshake(const JobIdentity& job);
  const uint8_t* challenge() const { return challenge_; }
  Hello check(const uint8_t* hello);
  // The reply that accepts (status RR_SUCCESS) or rejects with a reason.
  std::string reply(rr_result_t status, const std::string& reason) const;
  // After check() threw: the reply that tells the client why ("" when none may be sent).
  const std::string& rejection() const { return rejection_; }

 private:
  const JobIdentity& job_;
  uint8_t challenge_[kChallengeBytes];
  uint8_t clientNonce_[16] = {};
  bool haveClientNonce_ = false;
  std::string rejection_;
};

// HMAC-SHA256 of data keyed by key; used by the handshake and its tests.
void hmacSha256(const std::string& key, const uint8_t* data, size_t len, uint8_t out[32]);

}  // namespace rr
