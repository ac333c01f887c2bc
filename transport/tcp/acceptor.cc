// acceptConcurrently; see acceptor.h.
#include "transport/tcp/acceptor.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <map>
#include <thread>
#include <vector>

#include "base/error.h"

namespace rr {
namespace {

constexpr int kHandshakeMs = 5000;  // a stalled client is dropped after this long
// A client that has sent nothing this long after the challenge is dropped: a ring peer
// answers at once, and a silent connection must not hold a slot for the whole handshake.
constexpr int kFirstByteMs = 1000;
constexpr size_t kMaxPending = 32;  // handshakes in progress at once
constexpr int kLoggedRejections = 20;  // then only counted: a flood must not fill the log

// One acceptConcurrently call: the accept loop on the caller's thread, a worker thread per
// handshake, everything shared under one lock.
class Acceptor {
 public:
  Acceptor(int listenFd, const JobIdentity& job, Deadline deadline, const AcceptCallbacks& cb, spdlog::logger& log,
           const std::string& portName)
      : listenFd_(listenFd), job_(job), deadline_(deadline), cb_(cb), log_(log), portName_(portName) {}

  AcceptStats run() {
    try {
      for (;;) {
        reapFinished();
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (cb_.done()) break;
        }
        if (Clock::now() >= deadline_) break;
        Fd fd = acceptUntil(listenFd_, std::min(deadline_, deadlineIn(20)));
        if (fd) take(std::move(fd));
      }
    } catch (...) {
      finish(std::chrono::milliseconds(0));
      throw;
    }
    // Handshakes still running get a moment to hear that the job is complete (a rank
    // started twice deserves a reason); the rest are hostile or stuck and are cut off.
    finish(std::chrono::milliseconds(300));
    return stats_;
  }

 private:
  // A handshake in progress: when it started, and whether the client has said anything.
  struct Pending {
    Clock::time_point start;
    bool spoke = false;
    bool evicted = false;
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  // A new connection gets a slot and a worker, or is turned away (its client tries again).
  void take(Fd fd) {
    const std::string peer = peerAddr(fd.get()).str();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_.size() >= kMaxPending && !evictSilent()) {
        reject(peer, "too many handshakes in progress", RR_ERR_TIMEOUT);
        return;
      }
      pending_[fd.get()] = Pending{Clock::now()};
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(Worker{std::thread([this, peer, done, fd = std::move(fd)]() mutable {
                                handshake(peer, std::move(fd));
                                done->store(true);
                              }),
                              done});
  }

  // Under the lock, with every slot taken: the oldest connection that has not said a word
  // gives its slot up (so a flood of silent connections cannot keep a ring peer out, whose
  // hello comes at once). False where every one has spoken.
  bool evictSilent() {
    auto oldest = pending_.end();
    for (auto it = pending_.begin(); it != pending_.end(); ++it)
      if (!it->second.spoke && !it->second.evicted &&
          (oldest == pending_.end() || it->second.start < oldest->second.start))
        oldest = it;
    if (oldest == pending_.end()) return false;
    oldest->second.evicted = true;
    ::shutdown(oldest->first, SHUT_RDWR);  // its worker ends and gives the slot back
    return true;
  }

  // A worker: the handshake, then the callbacks; every failure is a rejection.
  void handshake(const std::string& peer, Fd fd) {
    const int raw = fd.get();
    try {
      const Hello hello = handshakeServer(
          raw, job_, std::min(deadline_, deadlineIn(kHandshakeMs)),
          [this](const Hello& h) -> std::string {
            std::lock_guard<std::mutex> lock(mutex_);
            return cb_.done() ? cb_.full(h) : cb_.admit(h);
          },
          std::min(deadline_, deadlineIn(kFirstByteMs)), [this, raw] {
            std::lock_guard<std::mutex> lock(mutex_);
            if (auto it = pending_.find(raw); it != pending_.end()) it->second.spoke = true;
          });
      try {
        if (cb_.prepare) cb_.prepare(hello, raw);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        cb_.release(hello);
        throw;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.erase(raw);
      cb_.commit(hello, std::move(fd));
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = pending_.find(raw);
      const bool evicted = it != pending_.end() && it->second.evicted;
      if (it != pending_.end()) pending_.erase(it);
      reject(peer,
             evicted ? std::string("silent while every handshake slot was taken: dropped for a newer connection")
                     : std::string(e.what()),
             e.code());
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.erase(raw);
      reject(peer, std::string("internal error: ") + e.what(), RR_ERR_INTERNAL);
    }
    finished_.notify_all();
  }

  // Under the lock: counted, and logged up to kLoggedRejections.
  void reject(const std::string& peer, std::string why, rr_result_t code) {
    if (closing_) why = "dropped unfinished when " + portName_ + " closed (" + why + ")";
    ++stats_.rejected;
    stats_.last = peer + ": " + why;
    stats_.lastCode = code;
    if (stats_.rejected <= kLoggedRejections) log_.warn("{}: rejected connection from {}: {}", portName_, peer, why);
    if (stats_.rejected == kLoggedRejections)
      log_.warn("{}: {} connections rejected; further rejections are counted, not logged", portName_, stats_.rejected);
  }

  // Joins the workers that are done (a flood must not pile up threads until the end).
  void reapFinished() {
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (!it->done->load()) {
        ++it;
        continue;
      }
      it->thread.join();
      it = workers_.erase(it);
    }
  }

  // Cuts off the handshakes still running and joins every worker (also on an error).
  void finish(std::chrono::milliseconds grace) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait_for(lock, grace, [this] { return pending_.empty(); });
      closing_ = true;
      for (const auto& [fd, p] : pending_) ::shutdown(fd, SHUT_RDWR);
    }
    for (Worker& w : workers_) w.thread.join();
    workers_.clear();
  }

  const int listenFd_;
  const JobIdentity& job_;
  const Deadline deadline_;
  const AcceptCallbacks& cb_;
  spdlog::logger& log_;
  const std::string& portName_;
  std::mutex mutex_;
  std::condition_variable finished_;
  AcceptStats stats_;
  std::map<int, Pending> pending_;  // sockets whose handshake is running, to cut short at the end
  std::vector<Worker> workers_;     // the accept loop's only
  bool closing_ = false;            // set when the stragglers are cut off
};

}  // namespace

AcceptStats acceptConcurrently(int listenFd, const JobIdentity& job, Deadline deadline,
                               const AcceptCallbacks& callbacks, spdlog::logger& log,
                               const std::string& portName) {
  return Acceptor(listenFd, job, deadline, callbacks, log, portName).run();
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
