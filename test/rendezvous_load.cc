// The rendezvous under load: N simulated ranks (default 2,048), in a child process, speak
// the real handshake over loopback to one rank 0 (this process, the library's gatherRanks),
// with hostile clients mixed in: random bytes, a wrong HMAC, a half handshake that then
// stalls, an impostor claiming a rank that joined already. Every honest rank must join and
// get its right neighbour's endpoint (and nothing else), every hostile one be turned away,
// and rank 0's thread count must not grow with N (it runs on one thread). Prints the time
// to form, rank 0's peak thread count and memory growth, and the bytes it sent; the time is
// reported, not judged (docs/performance.md, "Thousands of ranks", records it).
// Usage: rendezvous_load [N]
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "engine/setup/bootstrap_wire.h"
#include "engine/setup/config.h"
#include "engine/plan/rd_schedule.h"
#include "engine/setup/rendezvous.h"
#include "base/error.h"
#include "transport/handshake.h"
#include "base/wire.h"

namespace {

using Clock = std::chrono::steady_clock;

// A number field of /proc/self/status ("Threads", "VmRSS" in kB); 0 if absent.
long statusField(const char* name) {
  long value = 0;
  char format[64];
  std::snprintf(format, sizeof format, "%s: %%ld", name);
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, format, &value) == 1) break;
  if (f != nullptr) std::fclose(f);
  return value;
}

int countThreads() { return static_cast<int>(statusField("Threads")); }

void raiseFdLimit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

// Reads what rank 0 still says (a rejection: one that stalls past the moment the job forms
// is told why, see rendezvous.cc) until it closes the connection, which throws, as the
// deadline does.
[[noreturn]] void readUntilClosed(int fd, rr::Deadline deadline) {
  for (;;) {
    uint8_t byte;
    rr::recvAll(fd, &byte, 1, deadline, "rank 0");
  }
}

// The child: `honest` ranks 1..honest over `threads` threads, plus the hostile clients.
int clients(const rr::SockAddr& addr, const rr::JobIdentity& job, int size, int threads) {
  const int honest = size - 1;
  std::atomic<int> ok{0}, wrong{0};
  std::atomic<bool> rank1Joined{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::pair<int, rr::Fd>> mine;
      const rr::Deadline deadline = rr::deadlineIn(60000);
      for (int r = 1 + t; r <= honest; r += threads) {
        try {
          rr::Fd fd = rr::connectTo(addr, deadline, "rank 0");
          rr::handshakeClient(fd.get(), job, rr::Hello{rr::LinkRole::kBootstrap, r, size, 0, 0},
                              deadline, "rank 0");
          const rr::Endpoint e{"127.0.0.1", static_cast<uint16_t>(10000 + r % 50000)};
          rr::sendArrival(fd.get(), rr::arrivalHere(e, rr::TransportKind::kTcp, rr::Config{}.jobSettings()), deadline, "rank 0");
          mine.emplace_back(r, std::move(fd));
          if (r == 1) rank1Joined = true;
        } catch (const rr::Error& e) {
          std::fprintf(stderr, "rank %d could not join: %s\n", r, e.what());
          ++wrong;
        }
      }
      // The verdict: the size, the right neighbour and the partners this rank connects to only.
      auto portOf = [](int rank) { return rank == 0 ? uint16_t{9999} : static_cast<uint16_t>(10000 + rank % 50000); };
      for (auto& [r, fd] : mine) {
        try {
          uint8_t n[4];
          rr::recvAll(fd.get(), n, 4, deadline, "rank 0");
          const bool tcp = rr::recvJobTransport(fd.get(), deadline, "rank 0") == rr::TransportKind::kTcp;
          const rr::Endpoint e = rr::recvEndpoint(fd.get(), deadline, "rank 0");
          bool partnersRight = true;
          for (int p : rr::rdPartners(r, size))
            if (rr::rdConnects(r, p)) partnersRight &= rr::recvEndpoint(fd.get(), deadline, "rank 0").port == portOf(p);
          uint8_t extra = 0;
          const bool more = ::recv(fd.get(), &extra, 1, MSG_DONTWAIT) > 0;
          if (rr::wire::get32(n) == static_cast<uint32_t>(size) && tcp && e.port == portOf((r + 1) % size) &&
              partnersRight && !more)
            ++ok;
          else ++wrong;
        } catch (const rr::Error& e) {
          std::fprintf(stderr, "rank %d got no verdict: %s\n", r, e.what());
          ++wrong;
        }
      }
    });
  }
  // Hostile clients, while the honest ones join.
  std::vector<std::thread> hostile;
  std::atomic<int> refused{0};
  auto expectRefused = [&](auto body) {
    hostile.emplace_back([&, body] {
      try {
        body();
      } catch (const rr::Error&) {
        ++refused;
      }
    });
  };
  for (int i = 0; i < 4; ++i) {
    expectRefused([&] {  // random bytes instead of a hello
      rr::Fd fd = rr::connectTo(addr, rr::deadlineIn(5000), "rank 0");  // refused once the job formed
      uint8_t junk[96];
      for (auto& b : junk) b = static_cast<uint8_t>(std::rand());
      rr::sendAll(fd.get(), junk, sizeof junk, rr::deadlineIn(5000), "rank 0");
      uint8_t challenge[rr::ServerHandshake::kChallengeBytes];
      rr::recvAll(fd.get(), challenge, sizeof challenge, rr::deadlineIn(10000), "rank 0");
      readUntilClosed(fd.get(), rr::deadlineIn(10000));
    });
    expectRefused([&] {  // the wrong secret
      rr::Fd fd = rr::connectTo(addr, rr::deadlineIn(5000), "rank 0");  // refused once the job formed
      rr::handshakeClient(fd.get(), rr::JobIdentity{job.jobId, "not the secret"},
                          rr::Hello{rr::LinkRole::kBootstrap, 1, size, 0, 0}, rr::deadlineIn(10000), "rank 0");
    });
    expectRefused([&] {  // half a handshake, then silence (cut off after 5 s, or told why once the job formed)
      rr::Fd fd = rr::connectTo(addr, rr::deadlineIn(5000), "rank 0");  // refused once the job formed
      uint8_t challenge[rr::ServerHandshake::kChallengeBytes];
      rr::recvAll(fd.get(), challenge, sizeof challenge, rr::deadlineIn(10000), "rank 0");
      rr::sendAll(fd.get(), challenge, 10, rr::deadlineIn(5000), "rank 0");
      readUntilClosed(fd.get(), rr::deadlineIn(15000));
    });
  }
  expectRefused([&] {  // an impostor claiming rank 1 once it joined honestly
    while (!rank1Joined) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rr::Fd fd = rr::connectTo(addr, rr::deadlineIn(3000), "rank 0");
    rr::handshakeClient(fd.get(), job, rr::Hello{rr::LinkRole::kBootstrap, 1, size, 0, 0},
                        rr::deadlineIn(10000), "rank 0");
    rr::sendArrival(fd.get(), rr::Arrival{rr::Endpoint{"127.0.0.1", 1}}, rr::deadlineIn(5000), "rank 0");
    uint8_t n[4];
    rr::recvAll(fd.get(), n, 4, rr::deadlineIn(20000), "rank 0");  // must not come
  });
  for (auto& t : pool) t.join();
  for (auto& t : hostile) t.join();
  std::printf("clients: %d of %d honest ranks joined and got exactly their right neighbour; "
              "%d wrong; %d of %zu hostile clients turned away\n",
              ok.load(), honest, wrong.load(), refused.load(), hostile.size());
  return ok == honest && wrong == 0 && refused == static_cast<int>(hostile.size()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2048;
  const int size = n + 1;
  raiseFdLimit();
  rr::Fd listener = rr::listenOn(rr::makeAddr("127.0.0.1", 0), SOMAXCONN);
  const rr::SockAddr addr = rr::localAddr(listener.get());
  rr::Config c;
  c.rank = 0;
  c.size = size;
  c.addr = addr.str();
  c.secret = "load-test";
  c.jobId = 0x10ad;
  c.connectTimeoutMs = 60000;
  const rr::JobIdentity job{c.jobId, c.secret};

  const pid_t child = ::fork();
  if (child == 0) {
    listener.reset();
    const int rc = clients(addr, job, size, 64);
    std::fflush(nullptr);
    std::_Exit(rc);
  }

  auto log = std::make_shared<spdlog::logger>("load", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::atomic<bool> sampling{true};
  std::atomic<int> peakThreads{0};
  std::thread sampler([&] {
    while (sampling) {
      peakThreads = std::max(peakThreads.load(), countThreads());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int threadsBefore = countThreads();  // this thread and the sampler
  const long rssBefore = statusField("VmRSS");
  const auto t0 = Clock::now();
  std::vector<rr::Arrival> table(static_cast<size_t>(size));
  int rc = 0;
  size_t sent = 0;
  try {
    std::vector<rr::Fd> conns = rr::gatherRanks(c, listener.get(), table, rr::deadlineIn(60000), *log);
    const double formed = std::chrono::duration<double>(Clock::now() - t0).count();
    table[0].endpoint = rr::Endpoint{"127.0.0.1", 9999};
    for (int r = 1; r < size; ++r) {  // as bootstrap.cc sends it: size, transport, right neighbour, partners
      std::vector<rr::Endpoint> partners;
      for (int p : rr::rdPartners(r, size))
        if (rr::rdConnects(r, p)) partners.push_back(table[static_cast<size_t>(p)].endpoint);
      const std::string verdict = rr::encodeVerdict(size, rr::TransportKind::kTcp,
                                                    table[static_cast<size_t>((r + 1) % size)].endpoint, partners);
      rr::sendAll(conns[static_cast<size_t>(r)].get(), verdict.data(), verdict.size(), rr::deadlineIn(10000), "rank");
      sent += verdict.size();
    }
    sampling = false;
    sampler.join();
    std::printf("rank 0: %d ranks joined in %.2f s on one thread (threads %d before, %d at the "
                "peak, with the sampler); memory +%.1f MiB; %zu bytes of verdicts (%.1f per rank)\n",
                n, formed, threadsBefore, peakThreads.load(), (statusField("VmRSS") - rssBefore) / 1024.0, sent,
                static_cast<double>(sent) / n);
    if (peakThreads.load() != threadsBefore) {
      std::printf("FAILED: rank 0's thread count grew during the rendezvous\n");
      rc = 1;
    }
  } catch (const rr::Error& e) {
    sampling = false;
    sampler.join();
    std::printf("FAILED: the rendezvous: %s\n", e.what());
    rc = 1;
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  return rc;
}
