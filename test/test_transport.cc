// The handshake over a socket pair (right secret, wrong secret, wrong job, rejected rank),
// interface selection syntax, and the TCP link's framing checks.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "transport/error.h"
#include "transport/handshake.h"
#include "transport/interfaces.h"
#include "transport/tcp/tcp_link.h"

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

TEST_CASE("a TCP link moves striped messages and rejects a frame of the wrong length") {
  rr::EventSet ep;
  auto listener = rr::listenOn(rr::makeAddr("127.0.0.1", 0), 4);
  const auto addr = rr::localAddr(listener.get());
  std::vector<rr::Fd> client, server;
  for (int i = 0; i < 3; ++i) {
    client.push_back(rr::connectTo(addr, rr::deadlineIn(2000), "test"));
    server.push_back(rr::acceptUntil(listener.get(), rr::deadlineIn(2000)));
  }
  rr::TcpLink sender(std::move(client), ep, 1, "sender");
  rr::TcpLink receiver(std::move(server), ep, 0, "receiver");
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
  rr::TcpLink receiver(std::move(server), ep, 0, "sender");
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
