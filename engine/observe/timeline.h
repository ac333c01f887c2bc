// Timeline (RR_TIMELINE=path): Chrome trace events, one file per communicator, that Perfetto
// and chrome://tracing open. "trace.json" becomes trace.<job>.<rank>.json, the job being the
// first 8 hex digits of the job id (a hash of RR_ADDR, or RR_JOB_ID); a file is created,
// never truncated, so a name already taken (another communicator's trace in this or another
// process) gets .2, .3, ... before ".json".
//
//   track "collectives": one slice per collective, from submission to completion, with
//                        its size, dtype, op and the collectives it was fused with
//   track "ring":        per pass: "waiting for peers" (until the left neighbour started),
//                        "reduce-scatter" (until every reduction was done; later rounds'
//                        all-gather overlaps it), "all-gather" (the rest)
//
// Events are written as they happen (buffered); the file is a complete JSON array once the
// communicator is destroyed.
#pragma once

#include <cstdint>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/run/progress_engine.h"
#include "engine/run/request.h"

namespace rr {

class Timeline {
 public:
  // nullptr when path is empty. Throws RR_ERR_SYSTEM if the file cannot be created.
  static std::unique_ptr<Timeline> open(const std::string& path, uint64_t jobId, int rank);
  ~Timeline();

  void submitted(const Request& request);
  void pass(const std::vector<std::shared_ptr<Request>>& ops, const PassTimes& times);
  void completed(const Request& request, const std::vector<std::shared_ptr<Request>>& group);

  static std::string fileFor(const std::string& path, uint64_t jobId, int rank, int copy);

 private:
  Timeline(std::FILE* file, int rank);
  double us(Clock::time_point t) const;
  void write(const std::string& event);

  std::mutex mutex_;
  std::FILE* file_;
  int rank_;
  Clock::time_point origin_;
  bool first_ = true;
};

}  // namespace rr
