// The authenticated handshake; see handshake.h for the message layout.
#include "transport/handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/wire.h"

namespace rr {
namespace {

constexpr size_t kNonce = 16;
constexpr size_t kMac = 32;
constexpr size_t kChallengeBytes = ServerHandshake::kChallengeBytes;
// magic, version, role, job id, rank, size, index, nonce, mac
constexpr size_t kHelloBody = 4 + 2 + 2 + 8 + 4 + 4 + 4 + kNonce;
constexpr size_t kHelloBytes = kHelloBody + kMac;
static_assert(kHelloBytes == ServerHandshake::kHelloBytes);
constexpr size_t kMaxReason = 240;
// status, reason length, mac, reason
constexpr size_t kReplyHead = 4 + 4 + kMac;

void randomBytes(uint8_t* out, size_t len) {
  if (RAND_bytes(out, static_cast<int>(len)) != 1)
    fail(RR_ERR_SYSTEM, "OpenSSL RAND_bytes failed to produce a nonce");
}

void replyMac(const JobIdentity& job, const uint8_t* clientNonce, const uint8_t* serverNonce,
              uint32_t status, uint8_t out[kMac]) {
  uint8_t buf[2 * kNonce + 4];
  std::memcpy(buf, clientNonce, kNonce);
  std::memcpy(buf + kNonce, serverNonce, kNonce);
  wire::put32(buf + 2 * kNonce, status);
  hmacSha256(job.secret, buf, sizeof buf, out);
}

std::string encodeReply(const JobIdentity& job, const uint8_t* clientNonce,
                        const uint8_t* serverNonce, rr_result_t status, const std::string& reason) {
  uint8_t buf[kReplyHead + kMaxReason];
  const size_t len = std::min(reason.size(), kMaxReason);
  wire::put32(buf, static_cast<uint32_t>(status));
  wire::put32(buf + 4, static_cast<uint32_t>(len));
  if (clientNonce != nullptr)
    replyMac(job, clientNonce, serverNonce, static_cast<uint32_t>(status), buf + 8);
  else
    std::memset(buf + 8, 0, kMac);
  std::memcpy(buf + kReplyHead, reason.data(), len);
  return std::string(reinterpret_cast<char*>(buf), kReplyHead + len);
}

// Sends `bytes` within 200 ms or not at all: a reply to a peer that may be rejected, or a
// hello to one that rejects this rank; if it does not read them, it sees the close.
void sendQuietly(int fd, const std::string& bytes, Deadline deadline) {
  if (bytes.empty()) return;
  try {
    sendAll(fd, bytes.data(), bytes.size(), std::min(deadline, deadlineIn(200)), "peer");
  } catch (const Error&) {
  }
}

}  // namespace

void hmacSha256(const std::string& key, const uint8_t* data, size_t len, uint8_t out[32]) {
  unsigned int outLen = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data, len, out, &outLen) ==
          nullptr ||
      outLen != kMac)
    fail(RR_ERR_SYSTEM, "OpenSSL HMAC-SHA256 failed");
}

namespace {

// recvAll or sendAll, where a connection that the server closes is TurnedAway.
template <class F>
void beforeReply(F&& transfer) {
  try {
    transfer();
  } catch (const TurnedAway&) {
    throw;
  } catch (const Error& e) {
    if (e.code() == RR_ERR_PEER_LOST) throw TurnedAway(RR_ERR_PEER_LOST, e.what());
    throw;
  }
}

}  // namespace

void handshakeClient(int fd, const JobIdentity& job, const Hello& self, Deadline deadline,
                     const std::string& peerName) {
  uint8_t challenge[kChallengeBytes];
  beforeReply([&] { recvAll(fd, challenge, sizeof challenge, deadline, peerName); });
  if (wire::get32(challenge) != kMagic)
    fail(RR_ERR_AUTH, "{} is not a ringreduce endpoint (bad magic 0x{:08x})", peerName,
         wire::get32(challenge));
  const uint8_t* serverNonce = challenge + 8;

  uint8_t hello[kHelloBytes];
  wire::put32(hello, kMagic);
  wire::put16(hello + 4, kProtocolVersion);
  wire::put16(hello + 6, static_cast<uint16_t>(self.role));
  wire::put64(hello + 8, job.jobId);
  wire::put32(hello + 16, static_cast<uint32_t>(self.rank));
  wire::put32(hello + 20, static_cast<uint32_t>(self.size));
  wire::put32(hello + 24, static_cast<uint32_t>(self.index) | (static_cast<uint32_t>(self.links) << 16));
  uint8_t* clientNonce = hello + 28;
  randomBytes(clientNonce, kNonce);
  uint8_t macInput[kNonce + kHelloBody];
  std::memcpy(macInput, serverNonce, kNonce);
  std::memcpy(macInput + kNonce, hello, kHelloBody);
  hmacSha256(job.secret, macInput, sizeof macInput, hello + kHelloBody);
  if (wire::get16(challenge + 4) != kProtocolVersion) {
    // Say hello anyway, so that the peer (rank 0 of another build) logs and reports which
    // version came, rather than a connection that closed.
    sendQuietly(fd, std::string(reinterpret_cast<const char*>(hello), sizeof hello), deadline);
    fail(RR_ERR_AUTH, "{} speaks protocol version {}, this rank speaks {}", peerName,
         wire::get16(challenge + 4), kProtocolVersion);
  }
  beforeReply([&] { sendAll(fd, hello, sizeof hello, deadline, peerName); });

  uint8_t reply[kReplyHead + kMaxReason];
  beforeReply([&] { recvAll(fd, reply, kReplyHead, deadline, peerName); });
  const uint32_t status = wire::get32(reply);
  const uint32_t reasonLen = std::min<uint32_t>(wire::get32(reply + 4), kMaxReason);
  std::string reason;
  if (status != RR_SUCCESS) {
    try {
      recvAll(fd, reply + kReplyHead, reasonLen, deadline, peerName);
      reason.assign(reinterpret_cast<char*>(reply + kReplyHead), reasonLen);
    } catch (const Error&) {
      reason = "(no reason given)";
    }
    const rr_result_t code = status <= RR_ERR_INTERNAL && status != RR_SUCCESS
                                 ? static_cast<rr_result_t>(status)
                                 : RR_ERR_AUTH;
    fail(code, "{} rejected the connection of rank {}: {}", peerName, self.rank, reason);
  }
  uint8_t expected[kMac];
  replyMac(job, clientNonce, serverNonce, status, expected);
  if (CRYPTO_memcmp(expected, reply + 8, kMac) != 0)
    fail(RR_ERR_AUTH, "{} could not prove it knows the job secret (wrong RR_SECRET?)", peerName);
}

ServerHandshake::ServerHandshake(const JobIdentity& job) : job_(job) {
  wire::put32(challenge_, kMagic);
  wire::put16(challenge_ + 4, kProtocolVersion);
  wire::put16(challenge_ + 6, 0);
  randomBytes(challenge_ + 8, kNonce);
}

Hello ServerHandshake::check(const uint8_t* hello) {
  const uint8_t* serverNonce = challenge_ + 8;
  if (wire::get32(hello) != kMagic)
    fail(RR_ERR_AUTH, "bad magic 0x{:08x} in hello", wire::get32(hello));
  const uint16_t version = wire::get16(hello + 4);
  if (version != kProtocolVersion) {
    std::string why = fmt::format("protocol version {} differs from this rank's {}", version,
                                  kProtocolVersion);
    rejection_ = encodeReply(job_, nullptr, serverNonce, RR_ERR_AUTH, why);
    throw Error(RR_ERR_AUTH, why);
  }
  uint8_t macInput[kNonce + kHelloBody];
  std::memcpy(macInput, serverNonce, kNonce);
  std::memcpy(macInput + kNonce, hello, kHelloBody);
  uint8_t expected[kMac];
  hmacSha256(job_.secret, macInput, sizeof macInput, expected);
  if (CRYPTO_memcmp(expected, hello + kHelloBody, kMac) != 0) {
    std::string why = "HMAC of the challenge does not match (wrong RR_SECRET?)";
    rejection_ = encodeReply(job_, nullptr, serverNonce, RR_ERR_AUTH, why);
    throw Error(RR_ERR_AUTH, why);
  }
  std::memcpy(clientNonce_, hello + 28, kNonce);
  haveClientNonce_ = true;
  const uint64_t jobId = wire::get64(hello + 8);
  if (jobId != job_.jobId) {
    std::string why = fmt::format("job id {:016x} differs from this job's {:016x}", jobId, job_.jobId);
    rejection_ = reply(RR_ERR_AUTH, why);
    throw Error(RR_ERR_AUTH, why);
  }
  Hello peer;
  peer.role = static_cast<LinkRole>(wire::get16(hello + 6));
  peer.rank = static_cast<int32_t>(wire::get32(hello + 16));
  peer.size = static_cast<int32_t>(wire::get32(hello + 20));
  peer.index = static_cast<uint16_t>(wire::get32(hello + 24) & 0xffffu);
  peer.links = static_cast<uint16_t>(wire::get32(hello + 24) >> 16);
  return peer;
}

std::string ServerHandshake::reply(rr_result_t status, const std::string& reason) const {
  return encodeReply(job_, haveClientNonce_ ? clientNonce_ : nullptr, challenge_ + 8, status, reason);
}

Fd dialPeer(const SockAddr& addr, const JobIdentity& job, const Hello& self, Deadline deadline,
            const std::string& who) {
  int turnedAway = 0;
  std::string last;
  auto pause = std::chrono::milliseconds(2);
  const std::string peer = fmt::format("{} at {}", who, addr.str());
  const auto away = [&] {
    return fmt::format("; {} turned this rank's connection away {} time{} before (the last: {}): its port had "
                       "every handshake slot taken, or took the connection for a silent one (a flood on the port?)",
                       who, turnedAway, turnedAway == 1 ? "" : "s", last);
  };
  for (;;) {
    Fd fd;
    try {
      fd = connectTo(addr, deadline, who);
      handshakeClient(fd.get(), job, self, deadline, peer);
      return fd;
    } catch (const TurnedAway& e) {
      ++turnedAway;
      last = e.what();
      if (Clock::now() + pause >= deadline) fail(RR_ERR_TIMEOUT, "could not connect to {} before the deadline{}", peer, away());
    } catch (const Error& e) {
      if (turnedAway == 0) throw;
      throw Error(e.code(), e.what() + away());
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

Hello handshakeServer(int fd, const JobIdentity& job, Deadline deadline,
                      const std::function<std::string(const Hello&)>& accept, Deadline firstByte,
                      const std::function<void()>& spoke) {
  ServerHandshake hs(job);
  sendAll(fd, hs.challenge(), ServerHandshake::kChallengeBytes, deadline, "client");
  uint8_t hello[kHelloBytes];
  if (firstByte < deadline) {
    uint8_t one = 0;
    recvAll(fd, &one, 1, firstByte, "client (its first byte)");
    hello[0] = one;
    if (spoke) spoke();
    recvAll(fd, hello + 1, sizeof hello - 1, deadline, "client");
  } else {
    recvAll(fd, hello, sizeof hello, deadline, "client");
  }
  Hello peer;
  try {
    peer = hs.check(hello);
  } catch (const Error&) {
    sendQuietly(fd, hs.rejection(), deadline);
    throw;
  }
  std::string why = accept(peer);
  if (!why.empty()) {
    sendQuietly(fd, hs.reply(RR_ERR_INVALID_ARGUMENT, why), deadline);
    throw Error(RR_ERR_INVALID_ARGUMENT, why);
  }
  sendQuietly(fd, hs.reply(RR_SUCCESS, ""), deadline);
  return peer;
}

}  // namespace rr
