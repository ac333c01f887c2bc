// Rank 0's rendezvous (gatherRanks) as a rank started twice, or late, meets it: the job
// forms while that connection is still in its handshake, or after the port closed.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "engine/setup/bootstrap_wire.h"
#include "engine/setup/config.h"
#include "engine/setup/rendezvous.h"
#include "base/error.h"
#include "transport/handshake.h"
#include "transport/socket.h"

namespace {

// Rank 0 of a job of two, its rendezvous (gatherRanks) on a thread of its own, its log kept.
struct RankZero {
  rr::Fd listener = rr::listenOn(rr::makeAddr("127.0.0.1", 0), SOMAXCONN);
  rr::SockAddr addr = rr::localAddr(listener.get());
  rr::Config c = config(addr);
  rr::JobIdentity job{c.jobId, c.secret};
  std::ostringstream logged;
  spdlog::logger log{"rendezvous-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(logged)};
  std::vector<rr::Arrival> table = std::vector<rr::Arrival>(2);
  std::vector<rr::Fd> conns;
  std::string failure;  // gatherRanks' error, if it threw
  std::thread thread;

  static rr::Config config(const rr::SockAddr& addr) {
    rr::Config c;
    c.rank = 0;
    c.size = 2;
    c.addr = addr.str();
    c.secret = "rendezvous-test";
    c.jobId = 0x7e57;
    c.connectTimeoutMs = 10000;
    return c;
  }
  void start(int deadlineMs) {
    thread = std::thread([this, deadlineMs] {
      try {
        conns = rr::gatherRanks(c, listener.get(), table, rr::deadlineIn(deadlineMs), log);
      } catch (const rr::Error& e) {
        failure = e.what();
      }
    });
  }
};

}  // namespace

TEST_CASE("a rank still in its handshake when the job forms is told why; one after it is refused") {
  RankZero zero;
  const rr::SockAddr& addr = zero.addr;
  const rr::JobIdentity& job = zero.job;
  zero.start(10000);

  // A second rank 1 whose process is slow: connected, its challenge waiting unread.
  rr::Fd slow = rr::connectTo(addr, rr::deadlineIn(5000), "rank 0");
  pollfd p{slow.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);  // the challenge came: rank 0 holds a session for it

  // Rank 1 joins: the job (of two) forms.
  rr::Fd one = rr::connectTo(addr, rr::deadlineIn(5000), "rank 0");
  rr::handshakeClient(one.get(), job, rr::Hello{rr::LinkRole::kBootstrap, 1, 2, 0, 0}, rr::deadlineIn(5000),
                      "rank 0");
  rr::sendArrival(one.get(), rr::Arrival{rr::Endpoint{"127.0.0.1", 4242}, 7, 8, rr::TransportKind::kEither},
                  rr::deadlineIn(5000), "rank 0");
  zero.thread.join();  // after the grace given to the open session
  REQUIRE(zero.failure.empty());
  REQUIRE(zero.conns.size() == 2);
  CHECK(zero.conns[1]);
  CHECK(zero.table[1].endpoint.port == 4242);
  CHECK(zero.table[1].pidNamespace == 7);
  CHECK(zero.table[1].ipcNamespace == 8);
  CHECK(zero.table[1].transport == rr::TransportKind::kEither);

  // Rank 0 still holds its listening socket (as it does while it sends the verdicts), but
  // a rank that comes now is refused at once, not queued and then reset.
  rr::Fd late(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(late);
  errno = 0;
  CHECK(::connect(late.get(), addr.get(), addr.len) == -1);
  CHECK(errno == ECONNREFUSED);

  // The slow process answers its challenge at last, and hears why it is turned away.
  std::string heard;
  try {
    rr::handshakeClient(slow.get(), job, rr::Hello{rr::LinkRole::kBootstrap, 1, 2, 0, 0}, rr::deadlineIn(5000),
                        "rank 0");
  } catch (const rr::Error& e) {
    heard = e.what();
  }
  INFO(heard);
  CHECK(heard.find("all 2 ranks have already joined") != std::string::npos);
  CHECK(zero.logged.str().find("rejected connection from 127.0.0.1:") != std::string::npos);
}

// Rank 1 joins rank 0's rendezvous with an arrival whose tail byte `at` is `value`.
void arriveWith(RankZero& zero, size_t at, uint8_t value) {
  rr::Fd one = rr::connectTo(zero.addr, rr::deadlineIn(5000), "rank 0");
  rr::handshakeClient(one.get(), zero.job, rr::Hello{rr::LinkRole::kBootstrap, 1, 2, 0, 0}, rr::deadlineIn(5000),
                      "rank 0");
  std::string arrival = rr::encodeArrival(rr::Arrival{rr::Endpoint{"127.0.0.1", 4242}, 7, 8, rr::TransportKind::kTcp, {}});
  arrival[arrival.size() - rr::kArrivalTail + at] = static_cast<char>(value);
  rr::sendAll(one.get(), arrival.data(), arrival.size(), rr::deadlineIn(5000), "rank 0");
  zero.thread.join();
}

TEST_CASE("an arrival whose transport is none of tcp, ucx and either is turned away, named") {
  RankZero zero;
  zero.start(1500);
  arriveWith(zero, 16, 9);  // the transport byte: no such kind
  INFO(zero.logged.str());
  INFO(zero.failure);
  CHECK(zero.logged.str().find("protocol error: rank 1 sent transport 9") != std::string::npos);
  CHECK(zero.failure.find("rank 1 did not join") != std::string::npos);
  CHECK(zero.table[1].endpoint.port == 0);  // nothing taken from it
}

// RR_ADDR=$(hostname):port where /etc/hosts maps the name to 127.0.1.1 (Debian's default)
// leaves rank 0 listening on loopback: ranks on other hosts never join, and rank 0's
// timeout says why.
TEST_CASE("a rendezvous on a loopback address that no rank joined says so, naming RR_ADDR's host if it was a name") {
  for (const char* host : {"127.0.0.1", "trainer-node-7"}) {
    RankZero zero;
    zero.c.addr = fmt::format("{}:{}", host, zero.addr.port());
    zero.start(300);
    zero.thread.join();
    INFO(zero.failure);
    CHECK(zero.failure.find("rank 1 did not join") != std::string::npos);
    CHECK(zero.failure.find("rank 0 listens on 127.0.0.1, a loopback address") != std::string::npos);
    CHECK(zero.failure.find("ranks on other hosts cannot reach it") != std::string::npos);
    CHECK((zero.failure.find("RR_ADDR's host 'trainer-node-7' resolves to here") != std::string::npos) ==
          (std::string(host) != "127.0.0.1"));
  }
}

TEST_CASE("an arrival with more job-wide settings than fit is turned away, named") {
  RankZero zero;
  zero.start(1500);
  arriveWith(zero, 17, rr::kMaxJobSettings + 1);  // the settings count
  INFO(zero.logged.str());
  CHECK(zero.logged.str().find("protocol error: rank 1 sent 9 job-wide settings (at most 8)") != std::string::npos);
  CHECK(zero.table[1].endpoint.port == 0);
}

TEST_CASE("job-wide settings: ranks that differ are named with the setting and both values") {
  const auto arrival = [](rr::TransportKind kind, rr::Config c) {
    return rr::arrivalHere(rr::Endpoint{"127.0.0.1", 1}, kind, c.jobSettings());
  };
  rr::Config base;
  std::vector<rr::Arrival> table(3, arrival(rr::TransportKind::kTcp, base));
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp).empty());

  rr::Config fusion = base;
  fusion.fusionBytes = 65536;
  table[2] = arrival(rr::TransportKind::kTcp, fusion);
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp) ==
        "ranks differ in a job-wide setting: rank 0 has RR_FUSION_BYTES=4194304, rank 2 has RR_FUSION_BYTES=65536 "
        "(it must be the same on every rank)");

  rr::Config algo = base;
  algo.algo = "hd";
  table[2] = arrival(rr::TransportKind::kTcp, base);
  table[1] = arrival(rr::TransportKind::kTcp, algo);
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp).find("rank 0 has RR_ALGO=auto, rank 1 has RR_ALGO=hd") !=
        std::string::npos);

  rr::Config segment = base;
  segment.segmentBytes = 69632;
  table[1] = arrival(rr::TransportKind::kTcp, segment);
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp)
            .find("rank 0 has RR_SEGMENT_BYTES=1048576, rank 1 has RR_SEGMENT_BYTES=69632") != std::string::npos);

  // RR_SOCKETS_PER_LINK only where the job runs over TCP.
  rr::Config sockets = base;
  sockets.socketsPerLink = 3;
  table[1] = arrival(rr::TransportKind::kEither, sockets);
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kUcx).empty());
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp).find("rank 1 has RR_SOCKETS_PER_LINK=3") != std::string::npos);

  // A rank of TCP only beside a rank of UCX only: no link could form.
  table[1] = arrival(rr::TransportKind::kUcx, base);
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp) ==
        "rank 1 uses the ucx transport, rank 0 uses tcp (RR_TRANSPORT, or a build or host without UCX): every rank "
        "must use the same");

  // A rank of another build that does not report one.
  table[1] = arrival(rr::TransportKind::kTcp, base);
  table[1].settings.pop_back();
  CHECK(rr::settingsMismatch(table, rr::TransportKind::kTcp).find("rank 1 does not report RR_SOCKETS_PER_LINK") !=
        std::string::npos);
}
