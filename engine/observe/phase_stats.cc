// PhaseStats; see phase_stats.h.
#include "engine/observe/phase_stats.h"

#include <algorithm>
#include <map>

#include <spdlog/fmt/fmt.h>

namespace rr {
namespace {

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

void PhaseStats::record(const std::vector<std::shared_ptr<Request>>& ops, const PassTimes& times) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (samples_.size() >= kMaxSamples) return;
  size_t bytes = 0;
  for (const auto& r : ops) bytes += r->bytes;
  samples_.push_back(Sample{ops.front(), times, bytes});
}

std::string PhaseStats::summary(int rank, int size) const {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr size_t kWarmup = 10;
  // Per bucket size: the medians of each phase.
  std::map<size_t, std::vector<std::vector<double>>> by;
  for (size_t i = kWarmup; i < samples_.size(); ++i) {
    const Sample& s = samples_[i];
    const Request& r = *s.request;
    const Clock::time_point woke = r.wokeAt.load();
    if (woke == Clock::time_point{}) continue;  // never waited for (rr_request_free'd)
    auto& v = by[s.bytes];
    v.resize(6);
    v[0].push_back(us(s.times.start - r.submitted));
    v[1].push_back(us(s.times.peers - s.times.start));
    v[2].push_back(us(s.times.end - s.times.peers));
    v[3].push_back(us(r.completedAt - s.times.end));
    v[4].push_back(us(woke - r.completedAt));
    v[5].push_back(us(woke - r.submitted));
  }
  if (by.empty()) return "";
  std::string out = fmt::format(
      "ringreduce phases, rank {} of {} (RR_PHASES=1; median us per collective): bytes | "
      "submission hand-off | left's header | data hops | publish | completion hand-off | total\n",
      rank, size);
  for (const auto& [bytes, v] : by) {
    out += fmt::format("  {:>10} | {:8.1f} | {:8.1f} | {:8.1f} | {:6.1f} | {:8.1f} | {:8.1f}  ({} collectives)\n",
                       bytes, median(v[0]), median(v[1]), median(v[2]), median(v[3]), median(v[4]),
                       median(v[5]), v[0].size());
  }
  return out;
}

}  // namespace rr
