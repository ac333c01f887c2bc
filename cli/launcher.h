// The local launcher behind `ringreduce run` and `ringreduce bench -N`: starts N ranks of a
// program on this host with RR_RANK, RR_SIZE, RR_ADDR (a free port on 127.0.0.1), a fresh
// RR_SECRET, RR_LOCAL_RANK, RR_LOCAL_SIZE and RR_LOCAL_CPUS (how many CPUs the launcher may
// use, which the ranks share), prefixes each output line with its rank, and, as mpirun
// does, stops the other ranks when one fails and exits with the failed rank's status. Each
// rank runs in a process group of its own, signalled as a group, so what a rank started (a
// wrapper script's children) ends with the job; a rank's leftovers are stopped when the job
// ends. The launcher ignores SIGPIPE (`run ... | head -1` does not orphan the ranks):
// output that cannot be written is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rr::cli {

// Where each rank may run: anywhere (kNone), or rank r on the r-th CPU this launcher may run
// on (kCore, as mpirun's --bind-to core; the caller checks that there are enough).
enum class Bind { kNone, kCore };

struct LaunchOptions {
  int ranks = 1;
  std::vector<std::string> argv;  // program and its arguments
  bool prefixOutput = true;       // false: ranks write straight to our stdout/stderr
  Bind bind = Bind::kNone;
};

// The CPUs this process may run on (its affinity mask), in order.
std::vector<int> allowedCpus();

// `--bind-to` as the commands take it: "core", "none", or "auto" (bench's default; run's is
// none): core when 1 or 2 ranks fit the CPUs, as mpirun binds by default, else none.
// Returns false, with a message in `error`, for another word or for core with more ranks
// than CPUs.
bool parseBind(const std::string& word, int ranks, Bind& bind, std::string& error);

// Returns the exit status for this process: 0 if every rank succeeded, else the first
// failed rank's exit status (128 + signal if it was killed).
int launch(const LaunchOptions& options);

// True if this process was started by a launcher that gives it a rank.
bool startedByLauncher();

// MemAvailable of /proc/meminfo in bytes, 0 if unknown.
uint64_t availableMemory();

}  // namespace rr::cli
