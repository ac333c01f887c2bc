// The handshake over a socket pair (right secret, wrong secret, wrong job, rejected rank),
// interface selection syntax, and the TCP link's framing checks and reads ahead.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <thread>

#include "base/error.h"
#include "transport/handshake.h"
#include "transport/interfaces.h"
#include "transport/tcp/tcp_link.h"
#include "base/wire.h"

namespace {

struct Outcome {
  rr_result_t client = RR_SUCCESS, server = RR_SUCCESS;
  std::string clientMsg, serverMsg;
};

Outcome shake(const rr::JobIdentity& serverJob, const rr::JobIdentity& clientJob, int rank,
              const std::string& reject = "") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  rr::Fd a(sv[0]), b(sv[1]);
  Outcome out;
  std::thread server([&] {
    try {
      rr::handshakeServer(a.get(), serverJob, rr::deadlineIn(2000),
                          [&](const rr::Hello& h) { return h.rank == rank ? reject : "bad rank"; });
    } catch (const rr::Error& e) {
      out.server = e.code();
      out.serverMsg = e.what();
      a.reset();
    }
  });
  try {
    rr::handshakeClient(b.get(), clientJob, rr::Hello{rr::LinkRole::kData, rank, 4, 0, 2},
                        rr::deadlineIn(2000), "test server");
  } catch (const rr::Error& e) {
    out.client = e.code();
    out.clientMsg = e.what();
  }
  server.join();
  return out;
}

}  // namespace

TEST_CASE("handshake accepts the right secret and rejects everything else") {
  rr::JobIdentity job{7, "s3cret"};
  Outcome ok = shake(job, job, 1);
  REQUIRE(ok.client == RR_SUCCESS);
  REQUIRE(ok.server == RR_SUCCESS);

  Outcome wrong = shake(job, rr::JobIdentity{7, "guess"}, 1);
  REQUIRE(wrong.server == RR_ERR_AUTH);
  REQUIRE(wrong.client == RR_ERR_AUTH);
  REQUIRE(wrong.clientMsg.find("RR_SECRET") != std::string::npos);

  Outcome otherJob = shake(job, rr::JobIdentity{8, "s3cret"}, 1);
  REQUIRE(otherJob.server == RR_ERR_AUTH);
  REQUIRE(otherJob.serverMsg.find("job id") != std::string::npos);

  Outcome rejected = shake(job, job, 1, "rank 1 joined twice");
  REQUIRE(rejected.server == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(rejected.clientMsg.find("rank 1 joined twice") != std::string::npos);
}

TEST_CASE("RR_SOCKET_IFNAME follows NCCL's syntax") {
  auto prefix = rr::parseInterfaceSpec("eth,ib");
  REQUIRE(rr::interfaceMatches(prefix, "eth0"));
  REQUIRE(rr::interfaceMatches(prefix, "ib1"));
  REQUIRE_FALSE(rr::interfaceMatches(prefix, "lo"));
  auto exclude = rr::parseInterfaceSpec("^docker,lo");
  REQUIRE_FALSE(rr::interfaceMatches(exclude, "docker0"));
  REQUIRE(rr::interfaceMatches(exclude, "eth0"));
  auto exact = rr::parseInterfaceSpec("=eth0");
  REQUIRE(rr::interfaceMatches(exact, "eth0"));
  REQUIRE_FALSE(rr::interfaceMatches(exact, "eth01"));
  auto notExact = rr::parseInterfaceSpec("^=lo");
  REQUIRE_FALSE(rr::interfaceMatches(notExact, "lo"));
  REQUIRE(rr::interfaceMatches(notExact, "lo2"));
  auto lo = rr::findInterface(rr::parseInterfaceSpec("=lo"));
  REQUIRE(lo.has_value());
  REQUIRE(lo->ip == "127.0.0.1");
}

// RR_TRANSPORT=auto and auto's thresholds tell one host from several by the addresses the
// ranks publish; a rank tells whether rank 0 may share its host by rank 0's address.
TEST_CASE("addresses on one host: equal, or both loopback; an address is here if it is loopback or an interface's") {
  REQUIRE(rr::sameHostAddress("10.0.0.5", "10.0.0.5"));
  REQUIRE(rr::sameHostAddress("127.0.1.1", "127.0.0.1"));  // Debian's name address, the route to it
  REQUIRE(rr::sameHostAddress("::1", "127.0.0.1"));
  REQUIRE(rr::sameHostAddress("::ffff:127.0.0.1", "127.0.0.2"));
  REQUIRE_FALSE(rr::sameHostAddress("10.0.0.5", "10.0.0.6"));
  REQUIRE_FALSE(rr::sameHostAddress("127.0.0.1", "10.0.0.5"));  // a host's own address is not loopback's
  REQUIRE_FALSE(rr::sameHostAddress("128.0.0.1", "127.0.0.1"));
  REQUIRE(rr::isAddressHere("127.0.0.1"));
  REQUIRE(rr::isAddressHere("127.0.1.1"));
  // TEST-NET-3 (RFC 5737): documentation only, on no interface of a test machine.
  REQUIRE_FALSE(rr::isAddressHere("203.0.113.7"));
  if (const auto any = rr::findInterface(rr::parseInterfaceSpec("^lo"))) REQUIRE(rr::isAddressHere(any->ip));
}

TEST_CASE("a TCP link moves striped messages and rejects a frame of the wrong length") {
  rr::EventSet ep;
  auto listener = rr::listenOn(rr::makeAddr("127.0.0.1", 0), 4);
  const auto addr = rr::localAddr(listener.get());
  std::vector<rr::Fd> client, server;
  for (int i = 0; i < 3; ++i) {
    client.push_back(rr::connectTo(addr, rr::deadlineIn(2000), "test"));
    server.push_back(rr::acceptUntil(listener.get(), rr::deadlineIn(2000)));
  }
  rr::TcpLink sender(std::move(client), ep, 1, 2, "sender");
  rr::TcpLink receiver(std::move(server), ep, 0, 2, "receiver");
  std::vector<uint8_t> data(1 << 20), got(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31);
  sender.postSend(data.data(), data.size(), rr::FrameType::kData);
  receiver.postRecv(got.data(), got.size(), rr::FrameType::kData);
  for (int i = 0; i < 100000 && receiver.recvsDone() < 1; ++i) {
    sender.progress();
    receiver.progress();
  }
  REQUIRE(receiver.recvsDone() == 1);
  REQUIRE(got == data);

  sender.postSend(data.data(), 100, rr::FrameType::kData);
  receiver.postRecv(got.data(), 200, rr::FrameType::kData);
  bool threw = false;
  for (int i = 0; i < 100000 && !threw; ++i) {
    sender.progress();
    try {
      receiver.progress();
    } catch (const rr::Error& e) {
      threw = true;
      REQUIRE(e.code() == RR_ERR_SYSTEM);
      REQUIRE(std::string(e.what()).find("expected a data frame of 200 bytes") != std::string::npos);
    }
  }
  REQUIRE(threw);
}

TEST_CASE("a TCP link rejects a frame of an unknown type") {
  rr::EventSet ep;
  auto listener = rr::listenOn(rr::makeAddr("127.0.0.1", 0), 4);
  std::vector<rr::Fd> client, server;
  client.push_back(rr::connectTo(rr::localAddr(listener.get()), rr::deadlineIn(2000), "test"));
  server.push_back(rr::acceptUntil(listener.get(), rr::deadlineIn(2000)));
  uint8_t frame[16 + 8] = {};
  frame[0] = 99;  // type 99, length 8
  frame[8] = 8;
  rr::sendAll(client[0].get(), frame, sizeof frame, rr::deadlineIn(2000), "receiver");
  rr::TcpLink receiver(std::move(server), ep, 0, 2, "sender");
  std::vector<uint8_t> got(8);
  receiver.postRecv(got.data(), got.size(), rr::FrameType::kData);
  bool threw = false;
  for (int i = 0; i < 100000 && !threw; ++i) {
    try {
      receiver.progress();
    } catch (const rr::Error& e) {
      threw = true;
      REQUIRE(e.code() == RR_ERR_SYSTEM);
      REQUIRE(std::string(e.what()).find("(type 99)") != std::string::npos);
    }
  }
  REQUIRE(threw);
}

namespace {

// A frame as the link writes it: type, aux 0, length, payload.
void appendFrame(std::vector<uint8_t>& out, rr::FrameType type, const std::vector<uint8_t>& payload) {
  uint8_t header[16];
  rr::wire::put32(header, static_cast<uint32_t>(type));
  rr::wire::put32(header + 4, 0);
  rr::wire::put64(header + 8, payload.size());
  out.insert(out.end(), header, header + 16);
  out.insert(out.end(), payload.begin(), payload.end());
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + seed);
  return v;
}

std::vector<uint8_t> abortPayload(int origin, rr_result_t code, const std::string& reason) {
  std::vector<uint8_t> p(16 + reason.size());
  rr::wire::put32(p.data(), static_cast<uint32_t>(origin));
  rr::wire::put32(p.data() + 4, static_cast<uint32_t>(code));
  rr::wire::put64(p.data() + 8, 7);
  std::memcpy(p.data() + 16, reason.data(), reason.size());
  return p;
}

// One raw socket to write the peer's bytes with, the other end in a TcpLink.
struct RawPeer {
  rr::EventSet ep;
  rr::Fd peer;
  std::unique_ptr<rr::TcpLink> link;
  RawPeer() {
    auto listener = rr::listenOn(rr::makeAddr("127.0.0.1", 0), 4);
    peer = rr::connectTo(rr::localAddr(listener.get()), rr::deadlineIn(2000), "test");
    std::vector<rr::Fd> server;
    server.push_back(rr::acceptUntil(listener.get(), rr::deadlineIn(2000)));
    link = std::make_unique<rr::TcpLink>(std::move(server), ep, 0, 4, "rank 0");
  }
  void write(const std::vector<uint8_t>& bytes) {
    rr::sendAll(peer.get(), bytes.data(), bytes.size(), rr::deadlineIn(2000), "the link");
  }
  // Receives one message of `n` bytes of `type` (bounded: 2 s).
  std::vector<uint8_t> receive(size_t n, rr::FrameType type) {
    std::vector<uint8_t> got(n);
    const uint64_t want = link->recvsDone() + 1;
    link->postRecv(got.data(), n, type);
    const rr::Deadline until = rr::deadlineIn(2000);
    while (link->recvsDone() < want && rr::Clock::now() < until) link->progress();
    REQUIRE(link->recvsDone() == want);
    return got;
  }
};

}  // namespace

TEST_CASE("a TCP link's recv of a small frame takes the frames behind it, which come out whole and in order") {
  // All in one write, so the first recv can take more than its frame: an op header, a
  // small data frame, one larger than the bounce buffer (read ahead in part), a small one.
  RawPeer p;
  const auto header = pattern(40, 1), small = pattern(1024, 2), large = pattern(10000, 3), last = pattern(8, 4);
  std::vector<uint8_t> bytes;
  appendFrame(bytes, rr::FrameType::kOpHeader, header);
  appendFrame(bytes, rr::FrameType::kData, small);
  appendFrame(bytes, rr::FrameType::kData, large);
  appendFrame(bytes, rr::FrameType::kData, last);
  p.write(bytes);
  CHECK(p.receive(header.size(), rr::FrameType::kOpHeader) == header);
  CHECK(p.receive(small.size(), rr::FrameType::kData) == small);
  CHECK(p.receive(large.size(), rr::FrameType::kData) == large);
  CHECK(p.receive(last.size(), rr::FrameType::kData) == last);
}

TEST_CASE("a TCP link reports an abort frame that came behind a small frame, while idle and while waiting") {
  // The abort's reason is the longest a link sends (4096 bytes), so the frame read ahead
  // ends before the abort does: the rest comes from the socket.
  for (const size_t reasonBytes : {size_t{20}, size_t{4096}}) {
    for (const bool idle : {true, false}) {
      CAPTURE(reasonBytes, idle);
      RawPeer p;
      const std::string reason = "frozen GPU" + std::string(reasonBytes - 10, 'x');
      const auto header = pattern(40, 5);
      std::vector<uint8_t> bytes;
      appendFrame(bytes, rr::FrameType::kOpHeader, header);
      appendFrame(bytes, rr::FrameType::kAbort, abortPayload(2, RR_ERR_TIMEOUT, reason));
      p.write(bytes);
      CHECK(p.receive(header.size(), rr::FrameType::kOpHeader) == header);
      std::vector<uint8_t> data(64);
      if (!idle) p.link->postRecv(data.data(), data.size(), rr::FrameType::kData);
      try {
        for (int i = 0; i < 1000; ++i) p.link->progress();  // idle: the abort is seen by peekIdle
        FAIL("no abort reported");
      } catch (const rr::Error& e) {
        CHECK(e.code() == RR_ERR_TIMEOUT);
        CHECK(e.origin() == 2);
        CHECK_THAT(e.what(), Catch::Matchers::StartsWith("rank 2 aborted the job: " + reason + " (reported by rank 0)"));
      }
    }
  }
}

TEST_CASE("a TCP link does not retry a receive that found nothing until epoll reports new bytes") {
  // The rule the engine's loops keep (ProgressEngine::wait dispatches before it looks
  // again): a recv that found the socket empty is not repeated on every progress (each
  // such recv costs a syscall and the socket's lock, which the sender's delivery wants);
  // the edge-triggered event for the next bytes clears it.
  RawPeer p;
  std::vector<uint8_t> got(64);
  p.link->postRecv(got.data(), got.size(), rr::FrameType::kData);
  CHECK_FALSE(p.link->progress());  // nothing yet: the recv finds the socket empty
  p.ep.dispatch(0);                 // (the events of the connection's setup, taken)
  CHECK_FALSE(p.link->progress());
  CHECK(p.link->waitsForEvent());  // the engine dispatches before it looks again
  const auto payload = pattern(64, 9);
  std::vector<uint8_t> bytes;
  appendFrame(bytes, rr::FrameType::kData, payload);
  p.write(bytes);
  for (int i = 0; i < 10; ++i) CHECK_FALSE(p.link->progress());
  CHECK(p.link->recvsDone() == 0);
  const rr::Deadline until = rr::deadlineIn(2000);
  while (p.ep.dispatch(0) == 0 && rr::Clock::now() < until) std::this_thread::yield();
  CHECK_FALSE(p.link->waitsForEvent());
  CHECK(p.link->progress());
  REQUIRE(p.link->recvsDone() == 1);
  CHECK(got == payload);
}
