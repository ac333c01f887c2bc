// The local launcher; see launcher.h.
#include "cli/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>


namespace rr::cli {
namespace {

volatile sig_atomic_t interrupted = 0;
void onSignal(int sig) { interrupted = sig; }

struct Rank {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  std::string outBuf, errBuf;
  bool exited = false;
  int status = 0;
};

std::string freshSecret() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    std::fprintf(stderr, "ringreduce run: cannot generate a secret\n");
    std::exit(1);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

// Moves complete lines from buf to fd, each prefixed with the rank.
void flushLines(std::string& buf, int fd, int rank, bool all) {
  size_t start = 0, nl;
  std::string out;
  while ((nl = buf.find('\n', start)) != std::string::npos) {
    out += fmt::format("[{}] ", rank) + buf.substr(start, nl - start + 1);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (all && !buf.empty()) {
    out += fmt::format("[{}] {}\n", rank, buf);
    buf.clear();
  }
  writeAll(fd, out);
}

// Reads what is there; returns false at EOF (and closes fd), or when `final` and empty.
bool drain(int& fd, std::string& buf, bool final = false) {
  char chunk[65536];
  ssize_t n = ::read(fd, chunk, sizeof chunk);
  if (n > 0) {
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return !final;
  ::close(fd);
  fd = -1;
  return false;
}

// Processes a rank left behind in its group (a wrapper's children) end with the job:
// SIGTERM, then SIGKILL after a second.
void stopLeftovers(const std::vector<Rank>& ranks) {
  bool any = false;
  for (const auto& rk : ranks) any |= ::kill(-rk.pid, SIGTERM) == 0;
  for (int i = 0; any && i < 20; ++i) {
    ::usleep(50000);
    any = false;
    for (const auto& rk : ranks) any |= ::kill(-rk.pid, 0) == 0;
  }
  for (const auto& rk : ranks) ::kill(-rk.pid, SIGKILL);
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

}  // namespace

uint64_t availableMemory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "MemAvailable: %lu kB", &kb) == 1) break;
  std::fclose(f);
  return kb * 1024;
}

bool startedByLauncher() {
  for (const char* v : {"RR_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"})
    if (const char* s = std::getenv(v); s != nullptr && *s != '\0') return true;
  return false;
}

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool parseBind(const std::string& word, int ranks, Bind& bind, std::string& error) {
  const size_t cpus = allowedCpus().size();
  if (word == "none") {
    bind = Bind::kNone;
  } else if (word == "auto") {
    // Open MPI's mpirun binds each of 1 or 2 ranks to a core by default (to a package from
    // 3, which on one package is no binding; none when oversubscribed).
    bind = ranks <= 2 && static_cast<size_t>(ranks) <= cpus ? Bind::kCore : Bind::kNone;
  } else if (word == "core") {
    if (static_cast<size_t>(ranks) > cpus) {
      error = fmt::format("--bind-to core needs a CPU per rank: {} ranks, {} CPUs allowed", ranks, cpus);
      return false;
    }
    bind = Bind::kCore;
  } else {
    error = fmt::format("--bind-to '{}' is not core, none or auto", word);
    return false;
  }
  return true;
}

namespace {

// A port on 127.0.0.1 for rank 0's rendezvous, held for the job: bound with SO_REUSEADDR
// and never listening, so rank 0's listener (which sets SO_REUSEADDR too) can bind it beside
// this socket, while the kernel hands it to no connect() and no bind to port 0 meanwhile (it
// takes their local ports from the same range, and skips a port a bind holds). A port the
// launcher let go of at once was free only until then. Returns the socket (-1 and `error`).
int reservePort(uint16_t& port, std::string& error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const int one = 1;
  const char* call = fd < 0                                                                   ? "socket"
                     : ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0       ? "setsockopt"
                     : ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0              ? "bind to 127.0.0.1:0"
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0           ? "getsockname"
                                                                                               : nullptr;
  if (call != nullptr) {
    error = fmt::format("{}: {}", call, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return -1;
  }
  port = ntohs(a.sin_port);
  return fd;
}

// Rank r's process: its own process group, its variables, its CPU; then the program.
[[noreturn]] void startRank(const LaunchOptions& o, int r, const std::string& addr, const std::string& secret,
                            const std::string& sharedCpus, const std::vector<int>& cpus, const int out[2],
                            const int err[2], std::vector<char*>& argv) {
  ::setpgid(0, 0);             // a group of its own, signalled as one
  ::signal(SIGPIPE, SIG_DFL);  // the launcher's SIG_IGN would survive exec
  if (o.prefixOutput) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
  }
  ::setenv("RR_RANK", std::to_string(r).c_str(), 1);
  ::setenv("RR_SIZE", std::to_string(o.ranks).c_str(), 1);
  ::setenv("RR_ADDR", addr.c_str(), 1);
  ::setenv("RR_SECRET", secret.c_str(), 1);
  ::setenv("RR_LOCAL_RANK", std::to_string(r).c_str(), 1);
  ::setenv("RR_LOCAL_SIZE", std::to_string(o.ranks).c_str(), 1);
  ::setenv("RR_LOCAL_CPUS", sharedCpus.c_str(), 1);
  if (static_cast<size_t>(r) < cpus.size()) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(r)], &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0)
      std::fprintf(stderr, "ringreduce run: rank %d: binding to CPU %d: %s\n", r, cpus[static_cast<size_t>(r)],
                   std::strerror(errno));
  }
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "ringreduce run: cannot start '%s': %s\n", argv[0], std::strerror(errno));
  std::_Exit(127);
}

// Forwards what the ranks wrote, line by line with their prefix, for up to 50 ms.
void forwardOutput(std::vector<Rank>& ranks) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> who;  // rank, is stderr
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].out >= 0) fds.push_back({ranks[r].out, POLLIN, 0}), who.emplace_back(r, false);
    if (ranks[r].err >= 0) fds.push_back({ranks[r].err, POLLIN, 0}), who.emplace_back(r, true);
  }
  ::poll(fds.data(), fds.size(), 50);
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Rank& rk = ranks[who[i].first];
    std::string& buf = who[i].second ? rk.errBuf : rk.outBuf;
    const bool open = drain(who[i].second ? rk.err : rk.out, buf);
    flushLines(buf, who[i].second ? 2 : 1, static_cast<int>(who[i].first), !open);
  }
}

// Until every rank has exited: their output forwarded; the first that fails (or a signal
// to the launcher) stops the others, SIGTERM to each rank's group, SIGKILL 3 s later.
// Returns the job's status: the failed rank's, 128 + a signal, or 0.
int superviseRanks(std::vector<Rank>& ranks) {
  int result = 0;
  int running = static_cast<int>(ranks.size());
  bool stopping = false;
  auto stopAt = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    forwardOutput(ranks);
    for (size_t r = 0; r < ranks.size(); ++r) {
      Rank& rk = ranks[r];
      int status = 0;
      if (rk.exited || ::waitpid(rk.pid, &status, WNOHANG) != rk.pid) continue;
      rk.exited = true;
      rk.status = status;
      --running;
      if (exitCodeOf(status) != 0 && !stopping) {
        result = exitCodeOf(status);
        std::fprintf(stderr, "ringreduce run: rank %zu %s; stopping the other ranks\n", r,
                     describeStatus(status).c_str());
        stopping = true;
      }
    }
    if (interrupted && !stopping) {
      std::fprintf(stderr, "ringreduce run: signal %d; stopping all ranks\n", static_cast<int>(interrupted));
      stopping = true;
      result = 128 + interrupted;
    }
    if (stopping && stopAt == std::chrono::steady_clock::time_point::max()) {
      for (auto& rk : ranks) ::kill(-rk.pid, SIGTERM);  // each rank's whole group
      stopAt = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
    if (stopping && std::chrono::steady_clock::now() >= stopAt) {
      for (auto& rk : ranks) ::kill(-rk.pid, SIGKILL);
      stopAt += std::chrono::hours(1);
    }
  }
  return result;
}

}  // namespace

int launch(const LaunchOptions& o) {
  const std::vector<int> allowed = allowedCpus();
  const std::vector<int> cpus = o.bind == Bind::kCore ? allowed : std::vector<int>{};
  // What the ranks share, whether each is bound to one of them or not (the spin's rule).
  const std::string sharedCpus = std::to_string(std::max<size_t>(1, allowed.size()));
  uint16_t port = 0;
  std::string error;
  const int held = reservePort(port, error);
  if (held < 0) {
    std::fprintf(stderr, "ringreduce run: a port on 127.0.0.1 for the rendezvous: %s\n", error.c_str());
    return 1;
  }
  const std::string addr = fmt::format("127.0.0.1:{}", port);
  const std::string secret = freshSecret();
  std::vector<Rank> ranks(static_cast<size_t>(o.ranks));
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);

  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout (| head) must not orphan the ranks
  for (int r = 0; r < o.ranks; ++r) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (o.prefixOutput && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
      std::perror("ringreduce run: pipe");
      return 1;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("ringreduce run: fork");
      return 1;
    }
    if (pid == 0) startRank(o, r, addr, secret, sharedCpus, cpus, out, err, argv);
    ranks[r].pid = pid;
    ::setpgid(pid, pid);  // also here: whichever runs first
    if (o.prefixOutput) {
      ::close(out[1]);
      ::close(err[1]);
      ranks[r].out = out[0];
      ranks[r].err = err[0];
      ::fcntl(out[0], F_SETFL, O_NONBLOCK);
      ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    }
  }

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const int result = superviseRanks(ranks);
  ::close(held);
  stopLeftovers(ranks);
  for (auto& rk : ranks) {  // whatever is left in the pipes
    while (rk.out >= 0 && drain(rk.out, rk.outBuf, true)) {}
    while (rk.err >= 0 && drain(rk.err, rk.errBuf, true)) {}
  }
  for (int r = 0; r < o.ranks; ++r) {
    flushLines(ranks[r].outBuf, 1, r, true);
    flushLines(ranks[r].errBuf, 2, r, true);
  }
  return result;
}

}  // namespace rr::cli
