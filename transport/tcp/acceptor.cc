// acceptConcurrently; see acceptor.h.
#include "transport/tcp/acceptor.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "transport/error.h"

namespace rr {
namespace {

constexpr int kHandshakeMs = 5000;  // a stalled client is dropped after this long
constexpr size_t kMaxPending = 32;  // handshakes in progress at once

}  // namespace

AcceptStats acceptConcurrently(int listenFd, const JobIdentity& job, Deadline deadline,
                               const AcceptCallbacks& cb, spdlog::logger& log,
                               const std::string& portName) {
  std::mutex mutex;
  AcceptStats stats;
  std::set<int> pending;  // sockets whose handshake is running, to cut short at the end
  std::vector<std::thread> workers;
  std::condition_variable finished;
  bool closing = false;  // set when the stragglers are cut off
  auto reject = [&](const std::string& peer, std::string why, rr_result_t code) {  // under the lock
    if (closing) why = "dropped unfinished when " + portName + " closed (" + why + ")";
    ++stats.rejected;
    stats.last = peer + ": " + why;
    stats.lastCode = code;
    log.warn("{}: rejected connection from {}: {}", portName, peer, why);
  };
  // Cuts off the handshakes still running and joins every worker (also on an error).
  auto finish = [&](std::chrono::milliseconds grace) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait_for(lock, grace, [&] { return pending.empty(); });
      closing = true;
      for (int fd : pending) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : workers) t.join();
  };
  try {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (cb.done()) break;
      }
      if (Clock::now() >= deadline) break;
      Fd fd = acceptUntil(listenFd, std::min(deadline, deadlineIn(20)));
      if (!fd) continue;
      const std::string peer = peerAddr(fd.get()).str();
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (pending.size() >= kMaxPending) {
          reject(peer, "too many handshakes in progress", RR_ERR_TIMEOUT);
          continue;
        }
        pending.insert(fd.get());
      }
      workers.emplace_back([&, peer, fd = std::move(fd)]() mutable {
        const int raw = fd.get();
        try {
          Hello hello = handshakeServer(raw, job, std::min(deadline, deadlineIn(kHandshakeMs)),
                                        [&](const Hello& h) -> std::string {
                                          std::lock_guard<std::mutex> lock(mutex);
                                          if (cb.done()) return cb.full(h);
                                          return cb.admit(h);
                                        });
          try {
            if (cb.prepare) cb.prepare(hello, raw);
          } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            cb.release(hello);
            throw;
          }
          std::lock_guard<std::mutex> lock(mutex);
          pending.erase(raw);
          cb.commit(hello, std::move(fd));
          finished.notify_all();
        } catch (const Error& e) {
          std::lock_guard<std::mutex> lock(mutex);
          pending.erase(raw);
          reject(peer, e.what(), e.code());
          finished.notify_all();
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mutex);
          pending.erase(raw);
          reject(peer, std::string("internal error: ") + e.what(), RR_ERR_INTERNAL);
          finished.notify_all();
        }
      });
    }
  } catch (...) {
    finish(std::chrono::milliseconds(0));
    throw;
  }
  // Handshakes still running get a moment to hear that the job is complete (a rank
  // started twice deserves a reason); the rest are hostile or stuck and are cut off.
  finish(std::chrono::milliseconds(300));
  return stats;
}

PartnerAdmission::PartnerAdmission(const std::vector<int>& accept, int size) : size_(size) {
  for (int p : accept) claimed_[p] = false;
}

std::string PartnerAdmission::admit(const Hello& h) {
  auto it = claimed_.find(h.rank);
  if (it == claimed_.end() || h.size != size_)
    return fmt::format("rank {} (size {}) connected as a recursive doubling partner, which it is not", h.rank,
                       h.size);
  if (it->second) return fmt::format("partner rank {} is connected already", h.rank);
  it->second = true;
  return "";
}

std::map<int, Fd> PartnerAdmission::take(int myRank, const AcceptStats& stats, int connectTimeoutMs) {
  for (const auto& [rank, claimed] : claimed_)
    if (fds_.count(rank) == 0)
      fail(missingPeerCode(stats), "rank {}: recursive doubling partner rank {} did not connect within {} ms {}",
           myRank, rank, connectTimeoutMs, rejectionSummary(stats));
  return std::move(fds_);
}

std::string transportMismatch(const Hello& peer, LinkRole mine, int myRank) {
  auto name = [](LinkRole r) { return r == LinkRole::kUcx ? "ucx" : "tcp"; };
  if ((peer.role != LinkRole::kData && peer.role != LinkRole::kUcx) || peer.role == mine) return "";
  return fmt::format("rank {} uses the {} transport, rank {} uses {} (RR_TRANSPORT): every rank "
                     "must use the same", peer.rank, name(peer.role), myRank, name(mine));
}

rr_result_t missingPeerCode(const AcceptStats& stats) {
  return stats.rejected > 0 && stats.lastCode == RR_ERR_AUTH ? RR_ERR_AUTH : RR_ERR_TIMEOUT;
}

std::string rejectionSummary(const AcceptStats& stats) {
  return fmt::format("({} connection{} rejected{}{})", stats.rejected, stats.rejected == 1 ? "" : "s",
                     stats.rejected ? ", last: " : "", stats.last);
}

}  // namespace rr
