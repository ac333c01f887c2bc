// Config::load: the only place that reads the environment.
#include "engine/setup/config.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <thread>

#include "base/error.h"

namespace rr {
namespace {

bool documented(std::string_view name) {
  for (const SettingDoc& d : settingsTable())
    if (name == d.name) return true;
  return false;
}

const char* env(const char* name) {
  // Every RR_ variable the reader takes is in the settings table (a test diffs the docs
  // against it).
  if (std::string_view(name).starts_with("RR_") && !documented(name))
    fail(RR_ERR_INTERNAL, "internal error: the setting {} is read but not in the settings table", name);
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int64_t parseInt(const char* name, const char* text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0')
    fail(RR_ERR_INVALID_ARGUMENT, "{}='{}' is not an integer", name, text);
  if (v < lo || v > hi)
    fail(RR_ERR_INVALID_ARGUMENT, "{}={} is out of range [{}, {}]", name, v, lo, hi);
  return v;
}

// A switch variable: "0" or "1", else named.
bool parseSwitch(const char* name, const char* text) {
  const std::string_view v(text);
  if (v != "0" && v != "1") fail(RR_ERR_INVALID_ARGUMENT, "{}='{}' is not 0 or 1", name, text);
  return v == "1";
}

// The first launcher whose rank or size variable is set; both must be (a lone RR_RANK, or a
// stray RANK in a shell, must not become a silent job of one rank).
bool rankFromEnv(Config& c) {
  static constexpr const char* kPairs[][2] = {
      {"RR_RANK", "RR_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"},
      {"RANK", "WORLD_SIZE"},
  };
  for (const auto& pair : kPairs) {
    const char* rank = env(pair[0]);
    const char* size = env(pair[1]);
    if (rank == nullptr && size == nullptr) continue;
    if (rank == nullptr || size == nullptr)
      fail(RR_ERR_INVALID_ARGUMENT,
           "{}={} is set but {} is not: set both (or neither, for a single rank), or pass rank "
           "and size in rr_config_t",
           rank != nullptr ? pair[0] : pair[1], rank != nullptr ? rank : size,
           rank != nullptr ? pair[1] : pair[0]);
    c.size = static_cast<int>(parseInt(pair[1], size, 1, 1 << 20));
    c.rank = static_cast<int>(parseInt(pair[0], rank, 0, 1 << 20));
    c.rankSource = std::string(pair[0]) + "/" + pair[1];
    return true;
  }
  return false;
}

// The cores this process may run on.
int usableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

const std::vector<SettingDoc>& settingsTable() {
  static const std::vector<SettingDoc> table = {
      {"RR_RANK", "this process's rank, 0..size-1; else the launcher's: `OMPI_COMM_WORLD_RANK`, `PMI_RANK`, "
                  "`SLURM_PROCID`, `RANK` (torchrun)", "0", "no", false},
      {"RR_SIZE", "the number of ranks; else the launcher's: `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `SLURM_NTASKS`, "
                  "`WORLD_SIZE`; a rank without a size (or the reverse) is an error naming the missing one",
       "1", "yes: rank 0 turns a rank of another size away", false},
      {"RR_ADDR", "`host:port` (or `[v6]:port`) where rank 0 listens for the rendezvous; else "
                  "`MASTER_ADDR:MASTER_PORT`", "required when the size is above 1", "yes", false},
      {"RR_SECRET", "the job's secret: every connection proves it (HMAC-SHA256 of a challenge)",
       "empty (a warning is logged)", "yes: a connection without it is refused (`RR_ERR_AUTH`)", false},
      {"RR_JOB_ID", "the job's id, checked in every handshake", "a hash of `RR_ADDR`", "yes: checked in every handshake",
       false},
      {"RR_TIMEOUT_MS", "a collective that makes no progress this long fails with `RR_ERR_TIMEOUT` naming the rank "
                        "that holds the job up (`rr_config_t.timeout_ms` sets it per communicator)",
       "300000", "no", false},
      {"RR_CONNECT_TIMEOUT_MS", "the deadline of the rendezvous and of connecting the links, retries included",
       "`RR_TIMEOUT_MS`", "no", false},
      {"RR_SOCKET_IFNAME", "interfaces for the data links, NCCL's syntax: `eth,ib` prefixes, `^docker,lo` "
                           "excludes, `=eth0` exact names", "the address that routes to rank 0", "no", false},
      {"RR_TRANSPORT", "`tcp`, `ucx` (a build with UCX: RDMA, shared memory or TCP as UCX chooses; `UCX_*` "
                       "variables pass through) or `auto`: UCX's shared memory where every rank shares one host, "
                       "TCP elsewhere (docs/transports.md)",
       "`auto`", "`tcp` beside `ucx` fails init, naming both; `auto` runs beside either", false},
      {"RR_SOCKETS_PER_LINK", "TCP sockets each link is striped over (stripes of at least 64 KiB)", "2",
       "yes where the job runs over TCP: agreed at init", false},
      {"RR_SEGMENT_BYTES", "the largest pipelined segment, 4096 to 64 MiB (staging: 16 segments per communicator)",
       "1048576", "yes: agreed at init", false},
      {"RR_FUSION_BYTES", "all-reduces queued together with the same dtype and op share one pass, up to this many "
                          "bytes in all; 0 turns fusion off", "4194304", "yes: agreed at init", false},
      {"RR_ALGO", "the all-reduce's algorithm: `ring`, `rd` (recursive doubling), `hd` (halving-doubling) or "
                  "`auto`, by the bucket's size, the job's size and whether it spans hosts (docs/design.md, "
                  "\"Algorithms\"); device buckets take the ring at more than 2 ranks",
       "`auto`", "yes: agreed at init", false},
      {"RR_STALL_WARN_S", "when a collective has waited this long, rank 0 logs which ranks have not submitted it, at "
                          "most once a period", "60", "no", false},
      {"RR_TIMELINE", "Chrome trace events (Perfetto) to this path, one file per communicator: `trace.json` "
                      "becomes `trace.<job>.<rank>.json`, never truncated", "off", "no", false},
      {"RR_LOG_LEVEL", "`trace`, `debug`, `info`, `warn`, `error` or `off`; to stderr, the rank in each line",
       "`warn`", "no", false},
      {"RR_SPIN_US", "how long a waiting thread (the caller in `rr_wait`, the progress thread) looks before it "
                     "sleeps", "200, or 0 where this host's ranks outnumber the CPUs they share", "no", false},
      {"RR_LOCAL_SIZE", "the ranks on this host, for `RR_SPIN_US`'s default (set by `ringreduce run` and `bench "
                        "-N`; else `OMPI_COMM_WORLD_LOCAL_SIZE`, `LOCAL_WORLD_SIZE`, `MPI_LOCALNRANKS`)",
       "unset", "no", false},
      {"RR_LOCAL_CPUS", "the CPUs this host's ranks share, for `RR_SPIN_US`'s default (set by `ringreduce run` and "
                        "`bench -N`)", "the CPUs this process may use", "no", false},
      {"RR_LOCAL_RANK", "this rank's place on its host (set by `ringreduce run`); `bench --device` takes GPU "
                        "`RR_LOCAL_RANK` modulo the count", "unset", "no", false},
      {"RR_INLINE_BLOCKING", "`1`: a blocking call on host memory with nothing queued ahead of it runs its pass on "
                             "the calling thread; `0`: the progress thread runs every pass", "1", "no", false},
      {"RR_GPU_FLAG_OPS", "how the GPU waits for and writes the flags it shares with the progress thread: `auto` "
                          "(stream memory operations where the device has them) or `kernels` (one-thread kernels)",
       "`auto`", "no", false},
      {"RR_GPU_PROGRAM", "`1`: a device bucket's collective runs as one kernel that waits, reduces and signals "
                         "itself (experimental: docs/gpu.md)", "0", "no", false},
      {"RR_PHASES", "`1`: at destroy, print where each collective's time went (the median per phase and size) to "
                    "stderr", "0", "no", false},
      {"RR_TEST_FAKE_DEVICE", "`1`: every buffer counts as memory of the stand-in GPU (kernels/fake_gpu.h); a stream "
                              "is a stand-in stream", "0", "no", true},
      {"RR_TEST_HOLD_STREAM", "`host-function` (with the stand-in): hold the caller's stream with a blocking host "
                              "function, the design that deadlocked on a GPU", "off", "no", true},
      {"RR_TEST_KERNEL_LOADING", "`lazy` (with the stand-in): its kernels load at their first launch, not at open",
       "`at-open`", "no", true},
      {"RR_TEST_GPU_QUEUE_DEPTH", "N (with the stand-in): a stream holds at most N items", "1024", "no", true},
      {"RR_TEST_EXIT_IN_RING_SETUP", "`1`: the rank exits (status 3) between the rendezvous and its links; "
                                     "`after-report`: once it told rank 0 its links formed", "off", "no", true},
      {"RR_TEST_PAUSE_AFTER_SENDS_MS", "N: in the first pass with every send posted and not all done, the rank stops "
                                       "N ms, once", "0", "no", true},
      {"RR_TEST_LIE", "NAME[,NAME...] (a build with `-Dtest_lies`): the rank sends malformed messages "
                      "(base/test_lies.h)", "off", "no", true},
      {"RR_TEST_LIE_RANK", "R: only rank R tells `RR_TEST_LIE`'s lies", "every rank", "no", true},
  };
  return table;
}

std::string settingsMarkdown(bool testHooks) {
  std::string out = testHooks ? "| variable | what it does | default |\n|---|---|---|\n"
                              : "| variable | meaning | default | same on every rank |\n|---|---|---|---|\n";
  for (const SettingDoc& d : settingsTable()) {
    if (d.testOnly != testHooks) continue;
    out += testHooks ? fmt::format("| `{}` | {} | {} |\n", d.name, d.meaning, d.byDefault)
                     : fmt::format("| `{}` | {} | {} | {} |\n", d.name, d.meaning, d.byDefault, d.sameOnEveryRank);
  }
  return out;
}

Config Config::load(const rr_config_t* o) {
  if (o != nullptr && o->struct_size < sizeof(size_t))
    fail(RR_ERR_INVALID_ARGUMENT, "rr_config_t.struct_size {} is too small; use RR_CONFIG_INIT",
         o->struct_size);
  Config c;
  const bool haveRank = o != nullptr && o->rank >= 0;
  const bool haveSize = o != nullptr && o->size >= 0;
  if (!haveRank || !haveSize) {
    if (!rankFromEnv(c) && (!haveRank || !haveSize)) {
      c.rank = 0;
      c.size = 1;
      c.rankSource = "default (no RR_RANK/RR_SIZE or launcher variables: a single rank)";
    }
  }
  if (haveRank) c.rank = o->rank;
  if (haveSize) c.size = o->size;
  if (haveRank || haveSize) c.rankSource = "rr_config_t";
  if (c.size < 1) fail(RR_ERR_INVALID_ARGUMENT, "size {} must be at least 1", c.size);
  if (c.rank < 0 || c.rank >= c.size)
    fail(RR_ERR_INVALID_ARGUMENT, "rank {} is out of range for size {} (valid: 0..{})", c.rank,
         c.size, c.size - 1);

  if (o != nullptr && o->addr != nullptr) {
    c.addr = o->addr;
  } else if (const char* a = env("RR_ADDR")) {
    c.addr = a;
  } else if (env("MASTER_ADDR") && env("MASTER_PORT")) {
    c.addr = std::string(env("MASTER_ADDR")) + ":" + env("MASTER_PORT");
  }
  if (c.size > 1 && c.addr.empty())
    fail(RR_ERR_INVALID_ARGUMENT,
         "rank {} of {}: no rendezvous address; set RR_ADDR=host:port (where rank 0 listens)",
         c.rank, c.size);
  if (c.size > 1) {
    const size_t colon = c.addr.rfind(':');
    const std::string port = colon == std::string::npos ? "" : c.addr.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535)
      fail(RR_ERR_INVALID_ARGUMENT,
           "rank {} of {}: RR_ADDR='{}' needs a port in 1..65535 (the other ranks must find "
           "rank 0 there; port 0 would be a random one)",
           c.rank, c.size, c.addr);
  }

  if (o != nullptr && o->secret != nullptr)
    c.secret = o->secret;
  else if (const char* s = env("RR_SECRET"))
    c.secret = s;

  if (const char* j = env("RR_JOB_ID"))
    c.jobId = fnv1a(std::string("job:") + j);
  else
    c.jobId = fnv1a("addr:" + c.addr);

  if (o != nullptr && o->timeout_ms != 0)
    c.timeoutMs = o->timeout_ms;
  else if (const char* t = env("RR_TIMEOUT_MS"))
    c.timeoutMs = static_cast<int>(parseInt("RR_TIMEOUT_MS", t, 1, 1 << 30));
  if (c.timeoutMs < 1)
    fail(RR_ERR_INVALID_ARGUMENT, "timeout_ms {} must be positive", c.timeoutMs);
  c.connectTimeoutMs = c.timeoutMs;
  if (const char* t = env("RR_CONNECT_TIMEOUT_MS"))
    c.connectTimeoutMs = static_cast<int>(parseInt("RR_CONNECT_TIMEOUT_MS", t, 1, 1 << 30));

  if (o != nullptr && o->ifname != nullptr)
    c.ifname = o->ifname;
  else if (const char* i = env("RR_SOCKET_IFNAME"))
    c.ifname = i;

  if (const char* t = env("RR_TRANSPORT")) {
    const std::string_view v(t);
    if (v != "tcp" && v != "ucx" && v != "auto")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_TRANSPORT='{}' is not tcp, ucx or auto", t);
#ifndef RR_HAVE_UCX
    if (v == "ucx")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_TRANSPORT=ucx on rank {}: this build has no UCX (built "
           "without libucx-dev or with -Ducx=disabled)", c.rank);
#endif
    c.transport = t;
  }
#ifndef RR_HAVE_UCX
  if (c.transport == "auto") c.transport = "tcp";  // the one this build has
#endif
  if (const char* s = env("RR_SOCKETS_PER_LINK"))
    c.socketsPerLink = static_cast<int>(parseInt("RR_SOCKETS_PER_LINK", s, 1, 16));
  if (const char* s = env("RR_SEGMENT_BYTES"))
    c.segmentBytes = static_cast<size_t>(parseInt("RR_SEGMENT_BYTES", s, 4096, 64 << 20));
  if (const char* f = env("RR_FUSION_BYTES"))
    c.fusionBytes = static_cast<size_t>(parseInt("RR_FUSION_BYTES", f, 0, 1 << 30));
  if (const char* w = env("RR_STALL_WARN_S")) {
    char* end = nullptr;
    c.stallWarnS = std::strtod(w, &end);
    if (end == w || *end != '\0' || !(c.stallWarnS > 0) || c.stallWarnS > 1e6)
      fail(RR_ERR_INVALID_ARGUMENT, "RR_STALL_WARN_S='{}' is not a positive number of seconds", w);
  }
  if (const char* t = env("RR_TIMELINE")) c.timeline = t;
  if (const char* l = env("RR_LOG_LEVEL")) c.logLevel = l;
  if (const char* s = env("RR_SPIN_US")) {
    c.spinUs = static_cast<int>(parseInt("RR_SPIN_US", s, 0, 1000000));
    c.spinSource = "RR_SPIN_US";
  } else {
    for (const char* name : {"RR_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
      const char* v = env(name);
      if (v == nullptr) continue;
      const int64_t local = parseInt(name, v, 1, 1 << 20);
      // The cores the ranks share: the launcher's (RR_LOCAL_CPUS, set by ringreduce run and
      // bench -N, which may bind each rank to one of them), else this process's.
      const char* shared = env("RR_LOCAL_CPUS");
      const int64_t cores = shared != nullptr ? parseInt("RR_LOCAL_CPUS", shared, 1, 1 << 20) : usableCores();
      if (local > cores) {
        c.spinUs = 0;
        const std::string what = shared != nullptr ? fmt::format("RR_LOCAL_CPUS={}", cores)
                                                   : fmt::format("the {} cores this process may use", cores);
        c.spinSource = fmt::format("off: {}={} ranks on this host outnumber {}", name, local, what);
      }
      break;
    }
  }
  if (const char* a = env("RR_ALGO")) {
    const std::string_view v(a);
    if (v != "auto" && v != "ring" && v != "rd" && v != "hd")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_ALGO='{}' is not auto, ring, rd or hd", a);
    c.algo = a;
  }
  if (const char* p = env("RR_PHASES")) c.phases = parseSwitch("RR_PHASES", p);
  if (const char* b = env("RR_INLINE_BLOCKING")) c.inlineBlocking = parseSwitch("RR_INLINE_BLOCKING", b);
  if (const char* g = env("RR_GPU_FLAG_OPS")) {
    if (std::string_view(g) != "auto" && std::string_view(g) != "kernels")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_GPU_FLAG_OPS='{}' is not auto or kernels", g);
    c.gpuFlagKernels = std::string_view(g) == "kernels";
  }
  if (const char* g = env("RR_GPU_PROGRAM")) c.gpuProgram = parseSwitch("RR_GPU_PROGRAM", g);
  if (const char* f = env("RR_TEST_FAKE_DEVICE")) c.fakeDevice = std::string_view(f) == "1";
  if (const char* x = env("RR_TEST_EXIT_IN_RING_SETUP")) {
    c.testExitInRingSetup = std::string_view(x) == "1";
    c.testExitAfterRingReport = std::string_view(x) == "after-report";
  }
  if (const char* x = env("RR_TEST_PAUSE_AFTER_SENDS_MS"))
    c.testPauseAfterSendsMs = static_cast<int>(parseInt("RR_TEST_PAUSE_AFTER_SENDS_MS", x, 0, 60000));
  if (const char* h = env("RR_TEST_HOLD_STREAM")) {
    if (std::string_view(h) != "host-function" && std::string_view(h) != "value-wait")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_TEST_HOLD_STREAM='{}' is not host-function or value-wait", h);
    if (!c.fakeDevice && std::string_view(h) == "host-function")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_TEST_HOLD_STREAM=host-function needs RR_TEST_FAKE_DEVICE=1");
    c.testHoldByHostFunction = std::string_view(h) == "host-function";
  }
  if (const char* k = env("RR_TEST_KERNEL_LOADING")) {
    if (std::string_view(k) != "lazy" && std::string_view(k) != "at-open")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_TEST_KERNEL_LOADING='{}' is not lazy or at-open", k);
    if (!c.fakeDevice && std::string_view(k) == "lazy")
      fail(RR_ERR_INVALID_ARGUMENT, "RR_TEST_KERNEL_LOADING=lazy needs RR_TEST_FAKE_DEVICE=1");
    c.testLazyKernels = std::string_view(k) == "lazy";
  }
  if (const char* q = env("RR_TEST_GPU_QUEUE_DEPTH")) {
    if (!c.fakeDevice) fail(RR_ERR_INVALID_ARGUMENT, "RR_TEST_GPU_QUEUE_DEPTH needs RR_TEST_FAKE_DEVICE=1");
    c.testGpuQueueDepth = static_cast<int>(parseInt("RR_TEST_GPU_QUEUE_DEPTH", q, 1, 1 << 20));
  }
  return c;
}

namespace {

constexpr const char* kAlgoNames[] = {"auto", "ring", "rd", "hd"};

}  // namespace

std::vector<JobSetting> Config::jobSettings() const {
  uint64_t algoCode = 0;
  for (uint64_t i = 0; i < std::size(kAlgoNames); ++i)
    if (algo == kAlgoNames[i]) algoCode = i;
  return {{JobSettingId::kSegmentBytes, segmentBytes},
          {JobSettingId::kFusionBytes, fusionBytes},
          {JobSettingId::kAlgo, algoCode},
          {JobSettingId::kSocketsPerLink, static_cast<uint64_t>(socketsPerLink)}};
}

std::string jobSettingText(uint8_t id, uint64_t value) {
  switch (static_cast<JobSettingId>(id)) {
    case JobSettingId::kSegmentBytes: return fmt::format("RR_SEGMENT_BYTES={}", value);
    case JobSettingId::kFusionBytes: return fmt::format("RR_FUSION_BYTES={}", value);
    case JobSettingId::kAlgo:
      return value < std::size(kAlgoNames) ? fmt::format("RR_ALGO={}", kAlgoNames[value])
                                           : fmt::format("RR_ALGO=(code {})", value);
    case JobSettingId::kSocketsPerLink: return fmt::format("RR_SOCKETS_PER_LINK={}", value);
  }
  return fmt::format("setting #{}={}", id, value);
}

std::string Config::describe() const {
  return fmt::format(
      "rank {} of {} ({}), RR_ADDR={}, RR_SECRET {}, RR_TIMEOUT_MS={}, RR_CONNECT_TIMEOUT_MS={}, "
      "RR_SOCKET_IFNAME={}, RR_TRANSPORT={}, "
      "RR_SOCKETS_PER_LINK={}, RR_SEGMENT_BYTES={}, RR_FUSION_BYTES={}, RR_STALL_WARN_S={}, "
      "RR_TIMELINE={}, RR_LOG_LEVEL={}, RR_SPIN_US={} ({}), RR_ALGO={}, RR_INLINE_BLOCKING={}{}{}{}{}{}",
      rank, size, rankSource, addr.empty() ? "(none)" : addr, secret.empty() ? "unset" : "set",
      timeoutMs, connectTimeoutMs, ifname.empty() ? "(route to rank 0)" : ifname, transport, socketsPerLink, segmentBytes,
      fusionBytes, stallWarnS, timeline.empty() ? "(off)" : timeline, logLevel, spinUs, spinSource,
      algo, inlineBlocking ? 1 : 0, phases ? ", RR_PHASES=1" : "",
      fakeDevice ? ", RR_TEST_FAKE_DEVICE=1 (every buffer is memory of a fake GPU)" : "",
      testHoldByHostFunction ? ", RR_TEST_HOLD_STREAM=host-function" : "",
      testLazyKernels ? ", RR_TEST_KERNEL_LOADING=lazy" : "",
      testGpuQueueDepth > 0 ? fmt::format(", RR_TEST_GPU_QUEUE_DEPTH={}", testGpuQueueDepth) : std::string());
}

}  // namespace rr
