// Timeline; see timeline.h.
#include "engine/observe/timeline.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "kernels/dtype.h"
#include "base/error.h"

namespace rr {
namespace {

constexpr int kOpsTrack = 1;
constexpr int kRingTrack = 2;

}  // namespace

std::string Timeline::fileFor(const std::string& path, uint64_t jobId, int rank, int copy) {
  const std::string ext = ".json";
  const bool hasExt = path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  const std::string stem = hasExt ? path.substr(0, path.size() - ext.size()) : path;
  return fmt::format("{}.{:08x}.{}{}{}", stem, static_cast<uint32_t>(jobId), rank,
                     copy > 1 ? fmt::format(".{}", copy) : "", ext);
}

std::unique_ptr<Timeline> Timeline::open(const std::string& path, uint64_t jobId, int rank) {
  if (path.empty()) return nullptr;
  // Created, never truncated: a name that exists (another communicator's trace) is skipped.
  for (int copy = 1; copy <= 1000; ++copy) {
    const std::string file = fileFor(path, jobId, rank, copy);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) failErrno(errno, fmt::format("RR_TIMELINE: cannot create {}", file));
    std::FILE* f = ::fdopen(fd, "w");
    if (f == nullptr) {
      const int e = errno;
      ::close(fd);
      failErrno(e, fmt::format("RR_TIMELINE: cannot open {}", file));
    }
    return std::unique_ptr<Timeline>(new Timeline(f, rank));
  }
  fail(RR_ERR_SYSTEM, "RR_TIMELINE: 1000 traces named {} exist already", fileFor(path, jobId, rank, 1));
}

Timeline::Timeline(std::FILE* file, int rank) : file_(file), rank_(rank), origin_(Clock::now()) {
  std::fputs("[\n", file_);
  auto meta = [&](const char* what, int tid, const std::string& name) {
    nlohmann::json e = {{"name", what}, {"ph", "M"}, {"pid", rank_}, {"tid", tid},
                        {"args", {{"name", name}}}};
    write(e.dump());
  };
  meta("process_name", 0, fmt::format("rank {}", rank_));
  meta("thread_name", kOpsTrack, "collectives");
  meta("thread_name", kRingTrack, "ring");
}

Timeline::~Timeline() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fputs("\n]\n", file_);
  std::fclose(file_);
}

double Timeline::us(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Timeline::write(const std::string& event) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fputs(event.c_str(), file_);
}

void Timeline::submitted(const Request& r) {
  nlohmann::json e = {{"name", fmt::format("submit #{}", r.desc.seq)}, {"ph", "i"}, {"s", "t"},
                      {"ts", us(r.submitted)}, {"pid", rank_}, {"tid", kOpsTrack}};
  std::lock_guard<std::mutex> lock(mutex_);
  write(e.dump());
}

void Timeline::pass(const std::vector<std::shared_ptr<Request>>& ops, const PassTimes& t) {
  std::vector<uint64_t> seqs;
  for (const auto& r : ops) seqs.push_back(r->desc.seq);
  const std::string label = ops.size() == 1 ? fmt::format("#{}", seqs[0])
                                            : fmt::format("#{}-#{}", seqs.front(), seqs.back());
  auto slice = [&](const char* name, Clock::time_point from, Clock::time_point to) {
    nlohmann::json e = {{"name", fmt::format("{} {}", name, label)}, {"ph", "X"}, {"ts", us(from)},
                        {"dur", std::max(0.0, us(to) - us(from))}, {"pid", rank_},
                        {"tid", kRingTrack}, {"args", {{"ops", seqs}}}};
    write(e.dump());
  };
  std::lock_guard<std::mutex> lock(mutex_);
  slice("waiting for peers", t.start, t.peers);
  if (t.reduced > t.peers) slice("reduce-scatter", t.peers, t.reduced);
  slice("all-gather", t.reduced, t.end);
}

void Timeline::completed(const Request& r, const std::vector<std::shared_ptr<Request>>& group) {
  std::vector<uint64_t> fused;
  for (const auto& g : group)
    if (g->desc.seq != r.desc.seq) fused.push_back(g->desc.seq);
  nlohmann::json args = {{"seq", r.desc.seq}, {"bytes", r.bytes},
                         {"dtype", dtypeName(r.desc.dtype)}, {"op", opName(r.desc.op)},
                         {"count", r.desc.count},
                         {"fused_with", fused}};
  // Collectives overlap in time, so each is an async slice (its own row in Perfetto).
  const std::string name = fmt::format("{} #{}", collectiveName(r.desc.kind), r.desc.seq);
  nlohmann::json b = {{"name", name}, {"cat", "collective"}, {"ph", "b"}, {"id", r.desc.seq},
                      {"ts", us(r.submitted)}, {"pid", rank_}, {"tid", kOpsTrack}, {"args", args}};
  nlohmann::json e = {{"name", name}, {"cat", "collective"}, {"ph", "e"}, {"id", r.desc.seq},
                      {"ts", us(Clock::now())}, {"pid", rank_}, {"tid", kOpsTrack}};
  std::lock_guard<std::mutex> lock(mutex_);
  write(b.dump());
  write(e.dump());
}

}  // namespace rr
