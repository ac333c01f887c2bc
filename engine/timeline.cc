// Timeline; see timeline.h.
#include "engine/timeline.h"

#include <nlohmann/json.hpp>

#include <cerrno>

#include "kernels/dtype.h"
#include "transport/error.h"

namespace rr {
namespace {

constexpr int kOpsTrack = 1;
constexpr int kRingTrack = 2;

}  // namespace

std::string Timeline::fileFor(const std::string& path, int rank) {
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + "." + std::to_string(rank) + ext;
  return path + "." + std::to_string(rank) + ext;
}

std::unique_ptr<Timeline> Timeline::open(const std::string& path, int rank) {
  if (path.empty()) return nullptr;
  const std::string file = fileFor(path, rank);
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (f == nullptr) failErrno(errno, fmt::format("RR_TIMELINE: cannot create {}", file));
  return std::unique_ptr<Timeline>(new Timeline(f, rank));
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
