// The local launcher behind `ringreduce run` and `ringreduce bench -N`: starts N ranks of a
// program on this host with RR_RANK, RR_SIZE, RR_ADDR (a free port on 127.0.0.1) and a fresh
// RR_SECRET, prefixes each output line with its rank, and, as mpirun does, stops the other
// ranks when one fails and exits with the failed rank's status. Each rank runs in a process
// group of its own, signalled as a group, so what a rank started (a wrapper script's
// children) ends with the job; a rank's leftovers are stopped when the job ends. The
// launcher ignores SIGPIPE (`run ... | head -1` does not orphan the ranks): output that
// cannot be written is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rr::cli {

struct LaunchOptions {
  int ranks = 1;
  std::vector<std::string> argv;  // program and its arguments
  bool prefixOutput = true;       // false: ranks write straight to our stdout/stderr
};

// Returns the exit status for this process: 0 if every rank succeeded, else the first
// failed rank's exit status (128 + signal if it was killed).
int launch(const LaunchOptions& options);

// True if this process was started by a launcher that gives it a rank.
bool startedByLauncher();

// MemAvailable of /proc/meminfo in bytes, 0 if unknown.
uint64_t availableMemory();

}  // namespace rr::cli
