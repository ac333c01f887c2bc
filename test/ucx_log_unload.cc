// UCX's log handler (transport/ucx/ucx_worker.cc) over the library's life in one process:
// libringreduce.so is loaded with dlopen, two communicators (ranks 0 and 1 of one job, one
// thread each) run an all-reduce over UCX and are destroyed, and a line logged through UCX
// then goes to stderr, with the pid (the process held communicators of two ranks), and not
// to stdout. Then the library is unloaded (dlclose) while UCX stays loaded: a line logged
// through UCX must not call into the unloaded library (before the handler was taken back
// at unload, that was a jump into unmapped code) and goes to stdout again, UCX's default.
// With UCX_LOG_LEVEL=fatal in the environment: while the library is loaded UCX's level is
// error (its error lines reach the handler: some failures UCX reports only so) and neither
// an error line nor a warning (dispatched all the same, as if UCX's level were higher) is
// shown anywhere, on stdout or stderr; after dlclose the level is fatal again. At
// either level a PRINT line (ucs_print: no level) goes to stderr while loaded.
//
// Usage: ucx_log_unload LIBRINGREDUCE_SO   (RR_TRANSPORT=ucx and UCX_TLS in the environment)
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ringreduce/ringreduce.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "ucx_log_unload: %s\n", what.c_str());
  std::_Exit(1);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A port on 127.0.0.1 that was free a moment ago, for rank 0's rendezvous.
int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die("no free port on 127.0.0.1");
  close(fd);
  return ntohs(a.sin_port);
}

// Logs `text` at `level` through UCX's dispatch, as UCX's own lines are where that level is
// on (PRINT lines, ucs_print's, at any level), or always (`always`).
void ucxLog(ucs_log_level_t level, const char* text, bool always = false) {
  if (always || level == UCS_LOG_LEVEL_PRINT || ucs_log_is_enabled(level))
    ucs_log_dispatch(__FILE__, __LINE__, __func__, level, &ucs_global_opts.log_component, "%s", text);
  std::fflush(stdout);
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) die("usage: ucx_log_unload LIBRINGREDUCE_SO");
  const char* env = std::getenv("RR_TRANSPORT");
  if (env == nullptr || std::string(env) != "ucx") die("needs RR_TRANSPORT=ucx");
  // stdout and stderr into files of their own, read back at the end.
  char dir[] = "/tmp/rr_ucx_log_XXXXXX";
  if (mkdtemp(dir) == nullptr) die("mkdtemp failed");
  const std::string outPath = std::string(dir) + "/out", errPath = std::string(dir) + "/err";
  const int savedErr = dup(2);
  if (std::freopen(outPath.c_str(), "w", stdout) == nullptr || std::freopen(errPath.c_str(), "w", stderr) == nullptr)
    die("cannot redirect stdout and stderr");
  auto fail = [&](const std::string& what) {
    std::fflush(stdout);
    std::fflush(stderr);
    dprintf(savedErr, "ucx_log_unload: %s\n--- stdout:\n%s--- stderr:\n%s", what.c_str(), slurp(outPath).c_str(),
            slurp(errPath).c_str());
    std::_Exit(1);
  };

  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) fail(std::string("dlopen: ") + dlerror());
  using Init = decltype(&rr_comm_init);
  using AllReduce = decltype(&rr_allreduce);
  using Destroy = decltype(&rr_comm_destroy);
  using LastError = decltype(&rr_last_error);
  auto init = reinterpret_cast<Init>(dlsym(lib, "rr_comm_init"));
  auto allreduce = reinterpret_cast<AllReduce>(dlsym(lib, "rr_allreduce"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "rr_comm_destroy"));
  auto lastError = reinterpret_cast<LastError>(dlsym(lib, "rr_last_error"));
  if (init == nullptr || allreduce == nullptr || destroy == nullptr || lastError == nullptr)
    fail("rr_* symbols not found");

  const std::string addr = "127.0.0.1:" + std::to_string(freePort());
  rr_result_t results[2] = {RR_SUCCESS, RR_SUCCESS};
  float sums[2] = {0, 0};
  std::string errors[2];
  auto rank = [&](int r) {
    rr_config_t c = RR_CONFIG_INIT;
    c.rank = r;
    c.size = 2;
    c.addr = addr.c_str();
    c.secret = "ucx-log-unload";
    c.timeout_ms = 20000;
    rr_comm_t comm = nullptr;
    if ((results[r] = init(&c, &comm)) != RR_SUCCESS) {
      errors[r] = lastError();
      return;
    }
    float v = static_cast<float>(r + 1);
    if ((results[r] = allreduce(comm, &v, &sums[r], 1, RR_FLOAT32, RR_SUM, nullptr)) != RR_SUCCESS) errors[r] = lastError();
    const rr_result_t d = destroy(comm);
    if (results[r] == RR_SUCCESS) results[r] = d;
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r)
    if (results[r] != RR_SUCCESS || sums[r] != 3.0f)
      fail("rank " + std::to_string(r) + ": result " + std::to_string(results[r]) + " (" + errors[r] + "), sum " +
           std::to_string(sums[r]) + " (expected 3)");

  const char* level = std::getenv("UCX_LOG_LEVEL");
  const bool silenced = level != nullptr && std::string(level) == "fatal";
  if (silenced) {
    if (ucs_global_opts.log_component.log_level != UCS_LOG_LEVEL_ERROR)
      fail("UCX_LOG_LEVEL=fatal: UCX's level while the library is loaded is " +
           std::to_string(ucs_global_opts.log_component.log_level) + ", not error");
    ucxLog(UCS_LOG_LEVEL_ERROR, "rr-test error line while loaded");
    ucxLog(UCS_LOG_LEVEL_WARN, "rr-test warning dispatched while loaded", true);
  }
  ucxLog(UCS_LOG_LEVEL_WARN, "rr-test line while loaded");
  ucxLog(UCS_LOG_LEVEL_PRINT, "rr-test print line while loaded");  // shown at any level
  dlclose(lib);
  if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) != nullptr) fail("libringreduce.so still loaded after dlclose");
  ucxLog(UCS_LOG_LEVEL_WARN, "rr-test line after unload");

  const std::string out = slurp(outPath), err = slurp(errPath);
  if (silenced) {
    if (ucs_global_opts.log_component.log_level != UCS_LOG_LEVEL_FATAL)
      fail("UCX_LOG_LEVEL=fatal: UCX's level after dlclose is " +
           std::to_string(ucs_global_opts.log_component.log_level) + ", not fatal again");
    for (const char* line : {"rr-test line", "rr-test error line", "rr-test warning dispatched"})
      if (out.find(line) != std::string::npos || err.find(line) != std::string::npos)
        fail(std::string("UCX_LOG_LEVEL=fatal, yet \"") + line + "...\" shown");
  } else {
    const std::string who = "[ringreduce pid " + std::to_string(getpid()) + "] [UCX WARN] ucx_log_unload.cc:";
    if (err.find(who) == std::string::npos || err.find("rr-test line while loaded") == std::string::npos)
      fail("the line logged while loaded is not on stderr as \"" + who + "... rr-test line while loaded\"");
    if (out.find("rr-test line while loaded") != std::string::npos) fail("the line logged while loaded is on stdout");
    if (out.find("UCX  WARN") == std::string::npos || out.find("rr-test line after unload") == std::string::npos)
      fail("the line logged after unload is not UCX's own on stdout");
  }
  if (err.find("[UCX PRINT] ucx_log_unload.cc:") == std::string::npos ||
      err.find("rr-test print line while loaded") == std::string::npos || out.find("rr-test print") != std::string::npos)
    fail("the PRINT line logged while loaded is not on stderr alone");
  // stderr back for what runs at exit (a sanitizer's report), and the files gone.
  std::fflush(stderr);
  dup2(savedErr, 2);
  std::remove(outPath.c_str());
  std::remove(errPath.c_str());
  rmdir(dir);
  dprintf(2, "ucx_log_unload ok\n");
  return 0;
}
