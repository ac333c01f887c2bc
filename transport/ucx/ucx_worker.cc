// UcxWorker; see ucx_link.h.
#include "transport/ucx/ucx_link.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/chrono.h>

#include "base/error.h"
#include "transport/ucx/ucx_print.h"
#include "transport/ucx/ucx_transport.h"

namespace rr {
namespace {

void check(ucs_status_t status, const char* call) {
  if (status != UCS_OK) fail(RR_ERR_SYSTEM, "UCX: {} failed: {}", call, ucs_status_string(status));
}

// The UCX_* variables in the environment ("UCX_TLS=tcp, UCX_TCP_TX_SEG_SIZE=2M"), the usual
// cause when UCX refuses its own configuration; "none set" if there are none.
std::string ucxVariables() {
  std::string out;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string_view(*e).starts_with("UCX_")) out += (out.empty() ? "" : ", ") + std::string(*e);
  return out.empty() ? "none set" : out;
}

// Whether a UCX_* variable whose name ends in `suffix` is set (UCX_MM_FIFO_SIZE and
// UCX_POSIX_FIFO_SIZE both end in "_FIFO_SIZE").
bool ucxVariableEndingIn(std::string_view suffix) {
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    const std::string_view name = v.substr(0, v.find('='));
    if (name.starts_with("UCX_") && name.ends_with(suffix)) return true;
  }
  return false;
}

std::string contextInfo(ucp_context_h context) {
  return printed([&](FILE* f) { ucp_context_print_info(context, f); });
}

// Whether a list of transports ("tcp, sysv, posix") names `tl`.
bool listHas(const std::string& list, const std::string& tl) {
  return (", " + list + ",").find(", " + tl + ",") != std::string::npos;
}

// The transports of the context's resources ("#  resource 2 : md 1 dev 2 flags -- tcp/lo").
std::string transportsOf(const std::string& info) {
  std::string out;
  size_t pos = 0;
  while ((pos = info.find("flags -- ", pos)) != std::string::npos) {
    pos += 9;
    const std::string tl = info.substr(pos, info.find_first_of("/\n", pos) - pos);
    if (!listHas(out, tl)) out += (out.empty() ? "" : ", ") + tl;
  }
  return out;
}

// Whether every transport in `transports` is one of `allowed` (both ", "-separated lists).
bool onlyAmong(const std::string& transports, const std::string& allowed) {
  size_t start = 0;
  while (start < transports.size()) {
    size_t end = transports.find(", ", start);
    if (end == std::string::npos) end = transports.size();
    if (!listHas(allowed, transports.substr(start, end - start))) return false;
    start = end + 2;
  }
  return true;
}

// A net.core sysctl in bytes (wmem_max, rmem_max), or 0 when it cannot be read.
size_t coreSysctl(const char* name) {
  std::ifstream in(std::string("/proc/sys/net/core/") + name);
  size_t v = 0;
  return (in >> v) ? v : 0;
}

constexpr const char* kSharedMemory = "self, sysv, posix, cma, xpmem, knem";

// UCX writes its own log lines (an unknown UCX_* variable, a transport's error, a request
// not returned at destroy; as many as UCX_LOG_LEVEL lets through, warn by default) to
// stdout unless UCX_LOG_FILE names a file: into the output of the program that embeds this
// library, and into the table of `ringreduce bench`. They go to stderr instead, where this
// library's own lines go, each with the rank of the process's communicators (the pid where
// the process holds communicators of different ranks, or none); where UCX_LOG_FILE is set,
// to UCX's file as before; where UCX_LOG_LEVEL=fatal, nowhere (shownLevel). A UCX log
// handler is the process's, not a communicator's: installed with the first worker, kept
// while this library is loaded (HandlerRemover), and it takes the lines of any other UCX
// user in the process too. Fatal lines stay UCX's (it prints them, then aborts). An error
// line on a thread that progresses a worker goes to that worker too
// (UcxWorker::noteUcxError): some failures UCX reports only so.
constexpr int kNoRank = -1;
constexpr int kSeveralRanks = -2;
std::atomic<int> logRank{kNoRank};
// Where this thread's UCX lines go while a HeldUcxLines lives; else stderr.
thread_local std::vector<HeldUcxLines::Line>* heldLines = nullptr;
// Where this thread's lines that the user's level hides go while a worker of its starts
// (HiddenAtStart), for the worker's error should UCX not start; else nowhere.
thread_local std::string* hiddenAtStart = nullptr;
constexpr size_t kHiddenAtStart = 1024;  // the most of UCX's words an error quotes
// The worker this thread is progressing (Progressing), which UCX's error lines concern.
thread_local UcxWorker* progressing = nullptr;
// The most verbose level shown. Where the user's UCX_LOG_LEVEL hides error lines (fatal),
// UCX is set to pass them to the handler all the same, which shows none of them: some
// failures UCX reports only in an error line, and the user asked for silence, not a stall.
std::atomic<int> shownLevel{UCS_LOG_LEVEL_LAST};

// UCX's text line by line, without empty lines: one line of ours per line of UCX's, as its
// own handler prints.
std::vector<std::string_view> linesOf(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    if (end > 0) lines.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return lines;
}

ucs_log_func_rc_t ucxLineToStderr(const char* file, unsigned line, const char* /*function*/,
                                  ucs_log_level_t level, const ucs_log_component_config_t* /*config*/,
                                  const char* format, va_list ap) {
  if (level <= UCS_LOG_LEVEL_FATAL) return UCS_LOG_FUNC_RC_CONTINUE;
  char text[2048];
  std::vsnprintf(text, sizeof text, format, ap);
  if (level == UCS_LOG_LEVEL_ERROR && progressing != nullptr) progressing->noteUcxError(text);
  // A line the user's level hides is written nowhere; while held, it may still go into the
  // library's own message (HeldUcxLines::take). PRINT lines (ucs_print) have no level: UCX
  // writes them always.
  const bool shown =
      level == UCS_LOG_LEVEL_PRINT || static_cast<int>(level) <= shownLevel.load(std::memory_order_relaxed);
  const std::vector<std::string_view> lines = linesOf(text);
  if (!shown && heldLines == nullptr) {
    for (std::string_view l : lines)  // "; " between lines
      if (hiddenAtStart != nullptr && hiddenAtStart->size() < kHiddenAtStart)
        *hiddenAtStart += (hiddenAtStart->empty() ? "" : "; ") + std::string(l);
    return UCS_LOG_FUNC_RC_STOP;
  }
  if (shown && std::getenv("UCX_LOG_FILE") != nullptr) return UCS_LOG_FUNC_RC_CONTINUE;  // UCX writes it there
  const int rank = logRank.load(std::memory_order_relaxed);
  const std::string who = rank >= 0 ? fmt::format("rank {}", rank) : fmt::format("pid {}", getpid());
  const char* slash = std::strrchr(file, '/');
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  // The library's own lines' format (communicator.cc, makeLogger), then UCX's level and place.
  const std::string prefix =
      fmt::format("[{:%H:%M:%S}.{:03}] [ringreduce {}] [UCX {}] {}:{} ",
                  fmt::localtime(std::chrono::system_clock::to_time_t(now)), ms, who,
                  level < UCS_LOG_LEVEL_LAST ? ucs_log_level_names[level] : "PRINT",
                  slash != nullptr ? slash + 1 : file, line);
  std::string out;
  for (std::string_view l : lines) {
    if (heldLines != nullptr) heldLines->push_back({prefix, std::string(l), shown});
    out += prefix + std::string(l) + "\n";
  }
  if (heldLines == nullptr) std::fwrite(out.data(), 1, out.size(), stderr);
  return UCS_LOG_FUNC_RC_STOP;
}

// UCX's count of handlers right after ours was pushed (0: not pushed). When this library is
// unloaded (dlclose) before UCX is, the handler goes with it: it is taken back if it is
// still the last one, as UCX's stack allows, so that UCX never calls code that is gone.
unsigned handlersWithOurs = 0;

struct HandlerRemover {
  ~HandlerRemover() {
    if (handlersWithOurs == 0 || ucs_log_num_handlers() != handlersWithOurs) return;
    ucs_log_pop_handler();
    // The user's level back, with no handler left to hide what it hides.
    const int shown = shownLevel.load(std::memory_order_relaxed);
    if (shown != UCS_LOG_LEVEL_LAST) ucs_global_opts_set_value("LOG_LEVEL", ucs_log_level_names[shown]);
  }
} handlerRemover;

void routeUcxLogs(int rank) {
  if (rank >= 0) {
    int seen = kNoRank;
    if (!logRank.compare_exchange_strong(seen, rank) && seen != rank) logRank.store(kSeveralRanks);
  }
  static std::once_flag once;
  std::call_once(once, [] {
    ucs_log_push_handler(ucxLineToStderr);
    handlersWithOurs = ucs_log_num_handlers();
    const ucs_log_level_t asked = ucs_global_opts.log_component.log_level;
    if (asked < UCS_LOG_LEVEL_ERROR && ucs_global_opts_set_value("LOG_LEVEL", "error") == UCS_OK)
      shownLevel.store(asked, std::memory_order_relaxed);
  });
}

// Keeps this thread's lines that the user's UCX_LOG_LEVEL hides (fatal) in `said` while it
// lives, so that a worker that cannot start can quote UCX's reason (hiddenReason). Where a
// HeldUcxLines holds this thread's lines (auto's start), it has them all and this keeps
// nothing.
class HiddenAtStart {
 public:
  explicit HiddenAtStart(std::string& said) : before_(std::exchange(hiddenAtStart, &said)) {}
  ~HiddenAtStart() { hiddenAtStart = before_; }
  HiddenAtStart(const HiddenAtStart&) = delete;
  HiddenAtStart& operator=(const HiddenAtStart&) = delete;

 private:
  std::string* before_;
};

// "UCX said: ...", UCX's words that the user's level hid while this thread's worker started
// (HiddenAtStart); empty if none.
std::string hiddenReason() {
  if (hiddenAtStart == nullptr || hiddenAtStart->empty()) return "";
  return "UCX said: " + *hiddenAtStart;
}

// Marks this thread as progressing `worker` while it lives.
class Progressing {
 public:
  explicit Progressing(UcxWorker* worker) : before_(std::exchange(progressing, worker)) {}
  ~Progressing() { progressing = before_; }
  Progressing(const Progressing&) = delete;
  Progressing& operator=(const Progressing&) = delete;

 private:
  UcxWorker* before_;
};

}  // namespace

HeldUcxLines::HeldUcxLines() { heldLines = &lines_; }

HeldUcxLines::~HeldUcxLines() {
  heldLines = nullptr;
  for (const Line& l : lines_)
    if (l.shown) std::fprintf(stderr, "%s%s\n", l.prefix.c_str(), l.text.c_str());
}

size_t HeldUcxLines::drop(std::string_view containing) {
  const size_t before = lines_.size();
  std::erase_if(lines_, [containing](const Line& l) { return l.text.find(containing) != std::string::npos; });
  return before - lines_.size();
}

std::string HeldUcxLines::take() {
  std::string said;
  for (const Line& l : lines_) said += (said.empty() ? "" : "; ") + l.text;
  lines_.clear();
  return said;
}

UcxWorker::UcxWorker(int rank, bool sharedMemory)
    : sharedMemoryOnly_(sharedMemory && std::getenv("UCX_TLS") == nullptr), rank_(rank) {
  routeUcxLogs(rank);
  std::string hidden;  // UCX's words that UCX_LOG_LEVEL=fatal hides, for the error below
  HiddenAtStart keep(hidden);
  // The first context only tells which transports UCX may use here; a worker of its own
  // would have been created and destroyed for nothing (with 512 receive buffers in each
  // shared-memory transport: see initContext).
  initContext(Uses{});
  transports_ = transportsOf(contextInfo(context_));
  const bool sharedOnly = onlyAmong(transports_, kSharedMemory);
  const bool ucxRendezvous = std::getenv("UCX_RNDV_THRESH") != nullptr;  // asked for by the user
  Uses uses;
  uses.eagerOnly = sharedOnly && !ucxRendezvous;
  uses.tcp = listHas(transports_, "tcp");
  uses.tcpOnly = uses.tcp && onlyAmong(transports_, fmt::format("tcp, {}", kSharedMemory));
  uses.sharedMemory = listHas(transports_, "posix") || listHas(transports_, "sysv");
  if (sharedOnly || uses.tcp || uses.sharedMemory) {  // started again, knowing what UCX will use
    peerHandling_ = !sharedOnly;
    ucp_cleanup(context_);
    context_ = nullptr;
    initContext(uses);
  }
  createWorker();
  pullCapable_ = sharedOnly && listHas(transports_, "cma") && !ucxRendezvous;
  fragmentFrames_ = tcpSegmentsOurs_ && onlyAmong(transports_, "tcp, self");
}

void UcxWorker::initContext(const Uses& uses) {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.name = "ringreduce";
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read (check the UCX_* variables)");
  if (sharedMemoryOnly_) ucp_config_modify(config, "TLS", "sm");
  if (uses.eagerOnly) ucp_config_modify(config, "RNDV_THRESH", "inf");
  // UCX 1.13's tcp completes a zero-copy send twice when its peer dies while the bytes are
  // on their way, and its assertion ("comp->count > 0") aborts this process: copies only,
  // where tcp is the one network transport and UCX_ZCOPY_THRESH is not set (RDMA keeps its
  // zero copy; docs/transports.md, "What UCX does that shapes this transport").
  if (uses.tcpOnly && std::getenv("UCX_ZCOPY_THRESH") == nullptr) ucp_config_modify(config, "ZCOPY_THRESH", "inf");
  // UCX's keepalive (1.13) failed healthy tcp endpoints ("Endpoint timeout"); a peer that
  // dies closes its sockets, and one that hangs is RR_TIMEOUT_MS's, named.
  // UCX_KEEPALIVE_INTERVAL turns it back on.
  if (std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) ucp_config_modify(config, "KEEPALIVE_INTERVAL", "inf");
  // UCX's tcp moves a message in bcopy fragments of UCX_TCP_TX_SEG_SIZE (8 KiB) into
  // receive buffers of UCX_TCP_RX_SEG_SIZE (64 KiB): a 1 MiB segment took 128 sends; larger
  // fragments move more (docs/performance.md, "UCX's settings"). The buffers are per worker,
  // grown 8 at a time: about 10 MiB per rank.
  // UCP passes a name it does not know to every transport that has it (only tcp's iface
  // has these two), and warns when none has it: set only where UCX uses tcp. Both or
  // neither: a user's 2M for one beside our 1M for the other would break UCX's own rule
  // (RX at least TX), so a user who sets one gets UCX's default for the other, as without us.
  tcpSegmentsOurs_ =
      uses.tcp && std::getenv("UCX_TCP_TX_SEG_SIZE") == nullptr && std::getenv("UCX_TCP_RX_SEG_SIZE") == nullptr;
  if (tcpSegmentsOurs_) {
    ucp_config_modify(config, "TX_SEG_SIZE", "256K");
    ucp_config_modify(config, "RX_SEG_SIZE", "1M");
  }
  // UCX's tcp sockets keep the kernel's autotuned buffers unless told (UCX_TCP_SNDBUF and
  // UCX_TCP_RCVBUF "auto"). 4 MiB each where the kernel allows that much (net.core.wmem_max
  // / rmem_max; on a kernel that allows less, a fixed buffer would be smaller than
  // autotuning's, so it is left); with one-fragment segments they move more
  // (docs/performance.md, "UCX's settings").
  constexpr size_t kTcpBuffer = size_t{4} << 20;
  if (uses.tcp && std::getenv("UCX_TCP_SNDBUF") == nullptr && coreSysctl("wmem_max") >= kTcpBuffer)
    ucp_config_modify(config, "SNDBUF", "4M");
  if (uses.tcp && std::getenv("UCX_TCP_RCVBUF") == nullptr && coreSysctl("rmem_max") >= kTcpBuffer)
    ucp_config_modify(config, "RCVBUF", "4M");
  // UCX's shared memory (posix, sysv) takes eager messages in through a FIFO of
  // UCX_MM_FIFO_SIZE elements (64), each with its own 8 KiB receive buffer, used in turn: a
  // process's first pass round it faults in every buffer's pages on both sides, and page
  // faults are dear: a process's first small all-reduces were many times slower than the
  // rest, and fewer elements fault in fewer pages (docs/performance.md, "UCX's settings").
  // Frames from 64 KiB are pulled (ucx_link.h), so the FIFO only
  // ever holds small ones. A user's UCX_MM_FIFO_SIZE (or any UCX_*_FIFO_SIZE) wins.
  sharedFifo_ = uses.sharedMemory && !ucxVariableEndingIn("_FIFO_SIZE") ? kSharedFifo : 0;
  if (sharedFifo_ != 0) ucp_config_modify(config, "MM_FIFO_SIZE", std::to_string(sharedFifo_).c_str());
  // Those receive buffers come from a pool that UCX grows UCX_MM_RX_BUFS_GROW (512) at a
  // time, in a shared segment of its own: posix's and sysv's transports each took 4.3 MB
  // at the worker's start, posix's in /dev/shm (a container's 64 MiB held 14 ranks), and a
  // page fault per buffer. 32 at a time (268 KB) makes init faster and lets 64 ranks run in
  // a 64 MiB /dev/shm; the pool still grows where a rank holds more (docs/performance.md,
  // "Init under auto"). A user's UCX_*_RX_BUFS_GROW wins.
  sharedRxGrow_ = uses.sharedMemory && !ucxVariableEndingIn("_RX_BUFS_GROW") ? kSharedRxGrow : 0;
  if (sharedRxGrow_ != 0) ucp_config_modify(config, "MM_RX_BUFS_GROW", std::to_string(sharedRxGrow_).c_str());
  const ucs_status_t st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    const std::string said = hiddenReason();
    fail(RR_ERR_SYSTEM, "UCX: ucp_init (check UCX_TLS and UCX_NET_DEVICES) failed: {}{}", ucs_status_string(st),
         said.empty() ? said : " (" + said + ")");
  }
}

void UcxWorker::createWorker() {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // init's thread, then the progress thread
  if (ucs_status_t s = ucp_worker_create(context_, &wp, &worker_); s != UCS_OK) {
    ucp_cleanup(context_);
    // UCX's reason: in its line above, in auto's warning (held), or here where the user's
    // level hid it.
    const bool hidden = shownLevel.load(std::memory_order_relaxed) != UCS_LOG_LEVEL_LAST;
    std::string why = hiddenReason();
    if (why.empty())
      why = fmt::format("UCX's reason in its log line{}",
                        heldLines != nullptr ? "" : hidden ? ", which UCX_LOG_LEVEL=fatal hides" : " above");
    fail(RR_ERR_SYSTEM, "UCX: ucp_worker_create failed: {} ({}; the UCX_* variables: {})", ucs_status_string(s), why,
         ucxVariables());
  }
}

UcxWorker::~UcxWorker() {
  if (events_ != nullptr) events_->removeGuard(this);
  // After a failure, peers' frames of the collective this rank left arrived for receives it
  // never posted, and UCX warns of each at destroy ("unexpected tag-receive descriptor ...
  // was not matched"): what they mean is said once, at info. Elsewhere they would be a bug,
  // and are written as UCX wrote them.
  size_t unmatched = 0;
  {
    HeldUcxLines held;
    ucp_worker_destroy(worker_);
    if (failed_) unmatched = held.drop("unexpected tag-receive descriptor");
  }
  if (unmatched > 0 && log_ != nullptr)
    log_->info("UCX dropped {} message{} that peers sent for receives this rank never posted: frames of the "
               "collective it left when it failed", unmatched, unmatched == 1 ? "" : "s");
  ucp_cleanup(context_);
}

std::string UcxWorker::address() const {
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  check(ucp_worker_get_address(worker_, &addr, &len), "ucp_worker_get_address");
  std::string out(reinterpret_cast<const char*>(addr), len);
  ucp_worker_release_address(worker_, addr);
  return out;
}

void UcxWorker::attach(EventSet& events) {
  if (events_ != nullptr) return;
  int fd = -1;
  check(ucp_worker_get_efd(worker_, &fd), "ucp_worker_get_efd");
  events.add(fd, EPOLLIN, this);
  efd_ = fd;
  events.addGuard(this);
  events_ = &events;
}

void UcxWorker::freeze() noexcept {
  if (frozen_) return;
  frozen_ = true;
  if (events_ != nullptr && efd_ >= 0) events_->remove(efd_);  // its signals go unanswered now
}

bool UcxWorker::progressOnce() {
  if (frozen_) return false;
  const Progressing mark(this);
  recentErrors_.clear();
  return ucp_worker_progress(worker_) != 0;
}

bool UcxWorker::progress() {
  if (frozen_) return false;
  const Progressing mark(this);
  recentErrors_.clear();
  bool any = false;
  for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) any = true;
  if (any) {
    pollControls();
    noteActivity();
  }
  return any;
}

void UcxWorker::noteUcxError(std::string_view line) {
  if (!outOfMemory_.empty()) return;
  if (line.find("Failed to allocate memory pool") == std::string_view::npos) {
    if (recentErrors_.size() == kRecentErrors) recentErrors_.erase(recentErrors_.begin());
    recentErrors_.emplace_back(line.substr(0, 512));
    return;
  }
  std::string said;
  for (const std::string& e : recentErrors_) said += e + "; ";
  said += line;
  const auto has = [&](const char* what) { return said.find(what) != std::string::npos; };
  const char* what = has("/dev/shm") || has("md posix")
                         ? "UCX's shared memory (posix) keeps them in /dev/shm: free space there or give it more "
                           "(a container's: docker run --shm-size)"
                     : has("md sysv") || has("shmget")
                         ? "UCX's shared memory (sysv) is bounded by the kernel's limits (kernel.shmall, shmmax, "
                           "shmmni; ipcs -l shows them): raise them, or take sysv out of UCX_TLS"
                         : "give the process more memory";
  outOfMemory_ = fmt::format("UCX on rank {} could not grow its buffers, so nothing more arrives over it (UCX: "
                             "\"{}\"); {}, or run over TCP (RR_TRANSPORT=tcp)",
                             rank_, said, what);
  recentErrors_.clear();
}

void UcxWorker::pollControls() noexcept {
  for (UcxLink* l : links_) l->pollControl();
}

void UcxWorker::removeLink(const UcxLink* link) {
  links_.erase(std::remove(links_.begin(), links_.end(), link), links_.end());
}

bool UcxWorker::readyToSleep() {
  if (frozen_) return true;
  if (progress()) return false;
  if (!peerHandling_) {
    const bool recent = std::chrono::steady_clock::now() - lastActivity_ < kPullYield;
    for (const UcxLink* l : links_)
      if (l->sendsDone() < l->sendsPosted() && (recent || !l->sendsOnlyAwaitPulls())) {
        std::this_thread::yield();
        return false;
      }
  }
  const ucs_status_t st = ucp_worker_arm(worker_);
  // Events came in meanwhile (arming drained their signals): look again first, but yield
  // the core before: without the yield a rank whose peer shares its core went round
  // progress-arm-busy until the kernel's time slice ended, and that peer was the one it
  // waited for (docs/performance.md, "UCX's settings").
  if (st == UCS_ERR_BUSY) {
    std::this_thread::yield();
    return false;
  }
  check(st, "ucp_worker_arm");
  return true;
}

}  // namespace rr
