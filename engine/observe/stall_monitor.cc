// StallMonitor; see stall_monitor.h.
//
// Wire (little-endian, field by field): a report, 48 bytes, rank -> rank 0:
//   magic "RRRP" u32 | rank u32 | last submitted u64 | stalled op u64 (0: none) |
//   its bytes u64 | stalled for ms u32 | kind u8 | waiting on u8 | question u8 | gpu u8 |
//   the rank it waits for + 1 u32 (0: the neighbour "waiting on" names) | reserved u32
// and an answer, rank 0 -> rank: magic "RRAN" u32 | length u32 | text (at most 4 KiB).
#include "engine/observe/stall_monitor.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>

#include "engine/run/op_header.h"
#include "base/wire.h"

namespace rr {
namespace {

constexpr uint32_t kReportMagic = 0x52525250;  // "RRRP"
constexpr uint32_t kAnswerMagic = 0x5252414e;  // "RRAN"
constexpr size_t kReportBytes = 48;
constexpr size_t kMaxAnswer = 4096;

std::string humanBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", bytes / double(1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

bool stalled(const StallState& s, Clock::time_point now) {
  return s.seq != 0 && s.on != WaitingOn::kNothing && now - s.since >= StallMonitor::kStalledAfter;
}

}  // namespace

StallMonitor::StallMonitor(int rank, int size, std::vector<Fd>* bootstrap, double warnSeconds,
                           spdlog::logger& log)
    : rank_(rank),
      size_(size),
      bootstrap_(bootstrap),
      warn_(static_cast<int64_t>(warnSeconds * 1000)),
      interval_(std::min<int64_t>(1000, std::max<int64_t>(10, warn_.count() / 4))),
      beat_(std::max(250, size)),
      silent_(std::max<int64_t>(1500, 4 * beat_.count())),
      overdue_(2 * beat_ + std::chrono::milliseconds(200)),
      log_(log),
      status_(static_cast<size_t>(size)),
      partial_(static_cast<size_t>(size)) {
  // A rank not heard from yet counts as heard when the job formed: its silence is measured
  // from then, not from the clock's epoch.
  for (Status& st : status_) st.heard = Clock::now();
}

void StallMonitor::send(uint64_t lastSubmitted, const StallState& own, bool question) {
  const auto now = Clock::now();
  const bool isStalled = stalled(own, now);
  uint8_t msg[kReportBytes] = {};
  wire::put32(msg, kReportMagic);
  wire::put32(msg + 4, static_cast<uint32_t>(rank_));
  wire::put64(msg + 8, lastSubmitted);
  wire::put64(msg + 16, isStalled || question ? own.seq : 0);
  wire::put64(msg + 24, own.bytes);
  wire::put32(msg + 32, static_cast<uint32_t>(std::min<int64_t>(
                            std::chrono::duration_cast<std::chrono::milliseconds>(now - own.since).count(),
                            UINT32_MAX)));
  msg[36] = static_cast<uint8_t>(own.kind);
  msg[37] = static_cast<uint8_t>(isStalled || question ? own.on : WaitingOn::kNothing);
  msg[38] = question ? 1 : 0;
  msg[39] = static_cast<uint8_t>(own.gpu < 0 ? 0xff : std::min(own.gpu, 0xfe));
  wire::put32(msg + 40, isStalled || question ? static_cast<uint32_t>(own.peer + 1) : 0);
  // A report that does not fit now is simply sent later; rank 0 may be gone.
  if (::send((*bootstrap_)[0].get(), msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) ==
      static_cast<ssize_t>(sizeof msg)) {
    reported_ = lastSubmitted;
    lastReport_ = now;
  }
}

void StallMonitor::poll(uint64_t lastSubmitted, const StallState& own) {
  if (size_ == 1 || bootstrap_ == nullptr || bootstrap_->empty()) return;
  const auto now = Clock::now();
  if (rank_ != 0) {
    const bool changed = lastSubmitted != reported_ && now - lastReport_ >= interval_;
    const bool beat = now - lastReport_ >= beat_;
    if (changed || beat) send(lastSubmitted, own, false);
    return;
  }
  readReports(lastSubmitted, own);
  warn(own, lastSubmitted);
}

void StallMonitor::readReports(uint64_t lastSubmitted, const StallState& own) {
  const auto now = Clock::now();
  status_[0] = Status{lastSubmitted, own, now};
  for (int r = 1; r < size_; ++r) {
    Fd& fd = (*bootstrap_)[static_cast<size_t>(r)];
    if (!fd) continue;
    auto& buf = partial_[static_cast<size_t>(r)];
    for (;;) {
      uint8_t chunk[512];
      ssize_t got = ::recv(fd.get(), chunk, sizeof chunk, MSG_DONTWAIT);
      if (got <= 0) {
        if (got == 0) {
          log_.debug("rank {} closed its bootstrap connection", r);
          fd.reset();
        }
        break;
      }
      buf.insert(buf.end(), chunk, chunk + got);
    }
    size_t used = 0;
    for (; buf.size() - used >= kReportBytes; used += kReportBytes) {
      const uint8_t* m = buf.data() + used;
      if (wire::get32(m) != kReportMagic || static_cast<int>(wire::get32(m + 4)) != r ||
          m[36] > static_cast<uint8_t>(Collective::kBarrier) ||
          m[37] > static_cast<uint8_t>(WaitingOn::kDevice) || wire::get32(m + 40) > static_cast<uint32_t>(size_)) {
        log_.warn("rank {} sent a malformed progress report; ignoring its reports", r);
        fd.reset();
        break;
      }
      Status& st = status_[static_cast<size_t>(r)];
      st.lastSubmitted = std::max(st.lastSubmitted, wire::get64(m + 8));
      st.stall.seq = wire::get64(m + 16);
      st.stall.bytes = wire::get64(m + 24);
      st.stall.since = now - std::chrono::milliseconds(wire::get32(m + 32));
      st.stall.kind = static_cast<Collective>(m[36]);
      st.stall.on = static_cast<WaitingOn>(m[37]);
      st.stall.gpu = m[39] == 0xff ? -1 : m[39];
      st.stall.peer = static_cast<int>(wire::get32(m + 40)) - 1;
      st.heard = now;
      if (m[38] == 1 && st.stall.seq != 0) {  // a question: answer with the cause
        const std::string text = cause(r, st.stall.seq).substr(0, kMaxAnswer);
        std::vector<uint8_t> answer(8 + text.size());
        wire::put32(answer.data(), kAnswerMagic);
        wire::put32(answer.data() + 4, static_cast<uint32_t>(text.size()));
        std::copy(text.begin(), text.end(), answer.begin() + 8);
        if (::send(fd.get(), answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL) !=
            static_cast<ssize_t>(answer.size()))
          log_.debug("could not answer rank {}'s question at once", r);
      }
    }
    if (fd) buf.erase(buf.begin(), buf.begin() + static_cast<long>(std::min(used, buf.size())));
  }
}

std::string StallMonitor::cause(int from, uint64_t seq) {
  const auto now = Clock::now();
  const auto quietFor = [&](int r) { return now - status_[static_cast<size_t>(r)].heard; };
  const auto notReported = [&](int r) {
    return fmt::format("rank {} has not reported for {:.1f} s (stopped, frozen or its progress "
                       "thread cannot run)",
                       r, std::chrono::duration<double>(quietFor(r)).count());
  };
  // Where the chain of waits ends at a report that does not explain it (or comes back round),
  // the rank on it most overdue with its beat is the one: a rank stopped a moment before the
  // timeout is not yet silent, and its last report, sent while it still moved, says nothing.
  // Failing that, the job's most silent rank: a rank between passes of recursive doubling
  // waits for its left neighbour or any partner, and its report names only one of them, so
  // the chain can miss the rank that stopped.
  int overdue = -1;
  const auto unexplained = [&]() -> std::string {
    if (overdue >= 0) return notReported(overdue);
    int quietest = -1;
    for (int r = 1; r < size_; ++r)
      if (quietFor(r) > silent_ && (quietest < 0 || quietFor(r) > quietFor(quietest))) quietest = r;
    return quietest >= 0 ? notReported(quietest) : "";
  };
  int cur = from;
  // Each rank at most twice: the chain may move to an earlier op once per rank.
  for (int steps = 0; steps < 2 * size_; ++steps) {
    const Status& st = status_[static_cast<size_t>(cur)];
    if (cur != from) {
      // Silence first: a frozen rank's last report may predate its last submission.
      if (cur != 0 && quietFor(cur) > silent_) return notReported(cur);
      const bool missedBeats = cur != 0 && quietFor(cur) > overdue_;
      if (missedBeats && (overdue < 0 || quietFor(cur) > quietFor(overdue))) overdue = cur;
      // A rank that has missed two beats may have submitted since its last report (a rank
      // idle in user code still beats): it is named as not reporting, not as late. One
      // stalled in an earlier op waits for someone there: the chain goes on in that op.
      if (st.lastSubmitted < seq) {
        if (missedBeats) return notReported(cur);
        if (st.stall.seq == 0 || st.stall.seq >= seq || st.stall.on == WaitingOn::kNothing)
          return fmt::format("rank {} has not submitted it (its last submitted op is #{})", cur, st.lastSubmitted);
        seq = st.stall.seq;
      }
      if (st.stall.seq != seq || st.stall.on == WaitingOn::kNothing) return unexplained();
      if (st.stall.on == WaitingOn::kDevice)
        return fmt::format("rank {} is waiting for device work on its GPU {} that has not finished",
                           cur, st.stall.gpu);
    }
    if (st.stall.on != WaitingOn::kLeft && st.stall.on != WaitingOn::kRight) return unexplained();
    cur = st.stall.peer >= 0 && st.stall.peer < size_ ? st.stall.peer
          : st.stall.on == WaitingOn::kLeft           ? (cur - 1 + size_) % size_
                                                       : (cur + 1) % size_;
    // Every rank waits for another: a lost link, not a rank (unless one has gone quiet).
    if (cur == from) return unexplained();
  }
  return unexplained();
}

StallCause StallMonitor::explain(uint64_t lastSubmitted, const StallState& own,
                                 std::chrono::milliseconds limit, const std::function<void()>& meanwhile) {
  if (size_ == 1 || bootstrap_ == nullptr || bootstrap_->empty()) return {};
  if (rank_ == 0) {
    readReports(lastSubmitted, own);
    return {cause(0, own.seq)};
  }
  if (!(*bootstrap_)[0]) return {};
  send(lastSubmitted, own, true);
  // The answer is the next message from rank 0 (it sends nothing else on this connection).
  const int fd = (*bootstrap_)[0].get();
  const auto until = Clock::now() + limit;
  std::vector<uint8_t> buf;
  for (;;) {
    if (buf.size() >= 8) {
      if (wire::get32(buf.data()) != kAnswerMagic || wire::get32(buf.data() + 4) > kMaxAnswer) return {};
      const size_t len = wire::get32(buf.data() + 4);
      if (buf.size() >= 8 + len) return {std::string(buf.begin() + 8, buf.begin() + 8 + static_cast<long>(len))};
    }
    const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    // Rank 0 answers from its progress thread at least every 100 ms: no answer means it is
    // stopped, frozen or stuck, the likeliest holder of the job where it is the last hope.
    if (ms <= 0)
      return {fmt::format("rank 0 has not answered which rank holds the job up within {} ms (stopped, frozen, or "
                          "its progress thread cannot run)", limit.count()),
              false};
    if (meanwhile) meanwhile();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, meanwhile ? std::min(ms, 10) : ms) <= 0) continue;
    uint8_t chunk[512];
    const ssize_t got = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (got <= 0) return {};
    buf.insert(buf.end(), chunk, chunk + got);
  }
}

void StallMonitor::warn(const StallState& own, uint64_t ownLastSubmitted) {
  const auto now = Clock::now();
  if (quiet_ || now - lastWarn_ < warn_) return;
  // The oldest op some rank has been stalled in for longer than the period.
  const StallState* worst = nullptr;
  for (int r = 0; r < size_; ++r) {
    const Status& st = status_[static_cast<size_t>(r)];
    const StallState& s = r == 0 ? own : st.stall;
    if (s.seq == 0 || s.on == WaitingOn::kNothing || now - s.since < warn_) continue;
    if (r != 0 && now - st.heard > silent_) continue;
    if (worst == nullptr || s.seq < worst->seq) worst = &s;
  }
  if (worst == nullptr) return;
  lastWarn_ = now;
  status_[0].lastSubmitted = ownLastSubmitted;
  std::vector<int> behind;
  std::map<uint64_t, int> lastSeqs;
  for (int r = 0; r < size_; ++r) {
    const uint64_t last = status_[static_cast<size_t>(r)].lastSubmitted;
    if (last < worst->seq) {
      behind.push_back(r);
      lastSeqs[last]++;
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - worst->since).count();
  const std::string what = fmt::format("op #{} {} {}", worst->seq, collectiveName(worst->kind), humanBytes(worst->bytes));
  if (behind.empty()) {
    log_.warn("{}: every rank has submitted it, but it has waited {} s (a slow or lost link?)",
              what, waited);
    return;
  }
  std::string ranks, seqs;
  for (int r : behind) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  for (const auto& [seq, count] : lastSeqs) seqs += (seqs.empty() ? "#" : ", #") + std::to_string(seq);
  log_.warn("{}: waiting for rank{} {} (their last submitted op {} {}); waited {} s", what,
            behind.size() > 1 ? "s" : "", ranks, lastSeqs.size() > 1 ? "are" : "is", seqs, waited);
}

}  // namespace rr
