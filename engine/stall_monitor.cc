// StallMonitor; see stall_monitor.h.
#include "engine/stall_monitor.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>

#include "engine/op_header.h"
#include "transport/wire.h"

namespace rr {
namespace {

constexpr uint32_t kReportMagic = 0x52525250;  // "RRRP"
constexpr size_t kReportBytes = 16;

std::string humanBytes(size_t bytes) {
  if (bytes >= (size_t{1} << 30)) return fmt::format("{:.1f} GiB", bytes / double(1 << 30));
  if (bytes >= (size_t{1} << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace

StallMonitor::StallMonitor(int rank, int size, std::vector<Fd>* bootstrap, double warnSeconds,
                           spdlog::logger& log)
    : rank_(rank),
      size_(size),
      bootstrap_(bootstrap),
      warn_(static_cast<int64_t>(warnSeconds * 1000)),
      interval_(std::min<int64_t>(1000, std::max<int64_t>(10, warn_.count() / 4))),
      log_(log),
      lastSubmitted_(static_cast<size_t>(size), 0),
      partial_(static_cast<size_t>(size)) {}

void StallMonitor::poll(uint64_t lastSubmitted) {
  if (size_ == 1 || bootstrap_ == nullptr) return;
  const auto now = Clock::now();
  if (rank_ != 0) {
    if (lastSubmitted == reported_ || now - lastReport_ < interval_ || bootstrap_->empty()) return;
    uint8_t msg[kReportBytes];
    wire::put32(msg, kReportMagic);
    wire::put32(msg + 4, static_cast<uint32_t>(rank_));
    wire::put64(msg + 8, lastSubmitted);
    // A report that does not fit now is simply sent later; rank 0 may be gone.
    if (::send((*bootstrap_)[0].get(), msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) ==
        static_cast<ssize_t>(sizeof msg)) {
      reported_ = lastSubmitted;
      lastReport_ = now;
    }
    return;
  }
  for (int r = 1; r < size_; ++r) {
    Fd& fd = (*bootstrap_)[static_cast<size_t>(r)];
    if (!fd) continue;
    auto& buf = partial_[static_cast<size_t>(r)];
    for (;;) {
      uint8_t chunk[256];
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
      if (wire::get32(m) != kReportMagic || static_cast<int>(wire::get32(m + 4)) != r) {
        log_.warn("rank {} sent a malformed progress report; ignoring its reports", r);
        fd.reset();
        break;
      }
      lastSubmitted_[static_cast<size_t>(r)] = std::max(lastSubmitted_[static_cast<size_t>(r)], wire::get64(m + 8));
    }
    buf.erase(buf.begin(), buf.begin() + static_cast<long>(std::min(used, buf.size())));
  }
}

void StallMonitor::check(const OpDesc& op, size_t bytes, Clock::time_point since,
                         uint64_t ownLastSubmitted) {
  if (rank_ != 0 || size_ == 1) return;
  const auto now = Clock::now();
  if (now - since < warn_ || now - lastWarn_ < warn_) return;
  lastWarn_ = now;
  lastSubmitted_[0] = ownLastSubmitted;
  std::vector<int> behind;
  std::map<uint64_t, int> lastSeqs;
  for (int r = 0; r < size_; ++r) {
    if (lastSubmitted_[static_cast<size_t>(r)] < op.seq) {
      behind.push_back(r);
      lastSeqs[lastSubmitted_[static_cast<size_t>(r)]]++;
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - since).count();
  const std::string what = fmt::format("op #{} {} {}", op.seq, collectiveName(op.kind), humanBytes(bytes));
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
