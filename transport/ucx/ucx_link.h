// UcxLink: a Link over one UCP endpoint, with tagged messages (docs/transports.md, "UCX").
//
//   tag (64 bits)   [ key 32 | abort 1 | type 3 | message number 28 ]
//
// Every message of a link carries the key that its receiver chose at random and sent over
// the authenticated connection (ucx_transport.h), so a message from a process that the
// rendezvous did not vouch for never matches a receive. A receive matches the key and the
// message number, not the type: the type is checked on arrival, as the length is (a longer
// frame is truncated by UCX and fails; a shorter one fails here), so a mismatch is an error
// naming both, never a hang. One receive on the control plane (the abort bit) is always
// posted: an abort frame (message number 0), a farewell (1) or its answer (2). UCX picks the
// protocol by size (eager copies for small messages, rendezvous with zero copy for large
// ones, over whatever lanes it chose: tcp, shared memory, cma, rc/ud/dc on InfiniBand).
//
// A peer that dies is reported by UCX's peer error handling (UCP_ERR_HANDLING_MODE_PEER)
// and fails the next progress() with RR_ERR_PEER_LOST naming the rank, after any abort
// frame it left. UCX 1.13 has no peer failure handling for shared memory ("sysv/memory -
// no peer failure handler"), and without it a transfer from a dead peer aborts the process
// inside UCX (cma's process_vm_readv on a pid that is gone). So when every transport UCX
// may use is shared memory (UCX_TLS=sm), the worker is made eager-only (no rendezvous, so
// no cma; unless UCX_RNDV_THRESH says otherwise) and its endpoints without peer failure
// handling; the authenticated TCP connection of the address exchange (the sentinel, kept
// open for the link's life) then tells that a peer is gone: a process that dies closes
// it. UCX's own keepalive is off unless UCX_KEEPALIVE_INTERVAL is set (it failed healthy
// tcp endpoints here). At destroy, the farewell waits (bounded) until the peer has taken in
// what this link sent: UCX's send completion does not say so. A loss is reported while the
// link has work outstanding (as TcpLink reports a closed connection), not while the
// communicator is idle. Queues are fixed rings of kMaxQueued requests per direction, as
// TcpLink's.
//
// Single copy over shared memory without UCX's rendezvous (the pull): eager messages cost
// two copies per byte (into a shared queue, out of it), UCX's rendezvous one (cma: the
// receiver reads the sender's memory with process_vm_readv), but UCX 1.13 aborts the
// process when that read finds the peer gone. So on a shared-memory-only worker where the
// kernel lets ranks read each other (UCX lists cma) and both ends are in one pid namespace
// (said in the address exchange), a data frame of kPullMinBytes or more travels as a
// descriptor (its address and length) and the receiver reads it itself: a peer that is
// gone is RR_ERR_PEER_LOST naming the rank, a read the kernel refuses is an error that
// says how to go without. The send completes when the receiver says it has read the bytes
// (control message "pulled"); after a failure, quiesce() waits (bounded) until every
// announced frame was read or the peer said it will read no more ("no more pulls"), so a
// buffer never goes back to its owner while a peer may still read it. The peer's pid comes
// from the authenticated address exchange: a rank that holds the job's secret is trusted
// as far as that (as it is with the data it sends).
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "transport/link.h"

namespace spdlog {
class logger;
}

namespace rr {

// The UCP context and worker that every link of a communicator shares (one per
// communicator), and the worker's event fd in the engine's EventSet.
class UcxLink;

class UcxWorker final : public EventTarget, public SleepGuard {
 public:
  // `rank`: the communicator's rank, which UCX's own log lines carry (routeUcxLogs); -1 for
  // a worker of no communicator (`ringreduce info`). `sharedMemory`: UCX_TLS=sm where the
  // user did not set UCX_TLS (RR_TRANSPORT=auto on one host). Throws Error naming the UCP
  // call that failed.
  explicit UcxWorker(int rank = -1, bool sharedMemory = false);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  std::string address() const;  // this worker's address, for the peers
  // False when UCX may use shared memory only: endpoints without peer failure handling.
  bool peerFailureHandling() const { return peerHandling_; }
  // The transports UCX may use ("self, sysv, posix, cma"), from its resources.
  const std::string& transports() const { return transports_; }
  // Whether this rank can read a peer's memory for a pull: shared memory only, cma listed
  // (UCX found that the kernel allows it), and UCX's own rendezvous not asked for
  // (UCX_RNDV_THRESH unset).
  bool pullCapable() const { return pullCapable_; }
  // Whether UCX may use only tcp (and self) and with the transport's own fragment sizes
  // (UCX_TCP_TX_SEG_SIZE 256 KiB, set in init unless the user set either size): a message
  // that fits one fragment costs one copy into a tx buffer and one send, a larger one is
  // cut by UCX (Link::prefersFragmentFrames).
  bool fragmentFrames() const { return fragmentFrames_; }
  // The elements of UCX's shared-memory FIFO where this transport chose them (kSharedFifo:
  // UCX uses posix or sysv and no UCX_*_FIFO_SIZE is set), else 0.
  int sharedFifo() const { return sharedFifo_; }
  static constexpr int kSharedFifo = 16;
  // The receive buffers UCX's shared memory adds to its pool at a time where this transport
  // chose it (kSharedRxGrow: UCX uses posix or sysv and no UCX_*_RX_BUFS_GROW is set), else 0.
  int sharedRxGrow() const { return sharedRxGrow_; }
  static constexpr int kSharedRxGrow = 32;
  // Registers the event fd in `events` (once); the worker is armed before each sleep.
  void attach(EventSet& events);
  // Drives UCP until it has nothing more to do now; true if anything happened (then every
  // link's control plane is looked at).
  bool progress();
  // One ucp_worker_progress; true if it did anything.
  bool progressOnce();
  // After a failure, a request that UCX still holds may read or write memory that goes back
  // to its owner (a queued eager send reads the caller's bucket when the peer's queue has
  // room: a stopped peer that is resumed before the destroy made UCX read a bucket the
  // caller had already freed). UCX cannot cancel a send, and without peer failure handling
  // (shared memory) cannot close an endpoint by force, and only the worker's progress moves
  // such a request: so from then on nothing progresses this worker (progress does nothing,
  // the engine no longer waits on its event fd), and what is still queued goes unread with
  // the worker at destroy. Frozen for good.
  void freeze() noexcept;
  bool frozen() const { return frozen_; }
  // Every link takes in its control messages (UcxLink::pollControl).
  void pollControls() noexcept;
  // An error line UCX logged while this thread progressed this worker. Some failures UCX
  // reports only so: where its shared memory cannot grow a pool of receive buffers (a full
  // /dev/shm), it logs "Failed to allocate memory pool", takes nothing more in, and tries
  // again at each progress, while its requests stay in progress: every link stalled until
  // RR_TIMEOUT_MS. Such a line (with the error lines before it in the same progress, up to
  // kRecentErrors, which name the cause: /dev/shm full, a sysv limit) makes outOfMemory()
  // say so; UcxLink::progress then fails with it.
  void noteUcxError(std::string_view line);
  // Empty, or why this worker can take nothing more in: which rank, UCX's lines, what to do.
  const std::string& outOfMemory() const { return outOfMemory_; }
  void onEvent(uint32_t) override {}
  // Shared memory signals arrivals on the event fd but not room freed in a peer's queue:
  // with sends outstanding, the thread yields instead of sleeping. A pulled send waits for
  // the peer's "pulled", which does wake the worker, but sleeping there cost the pull its
  // gain (the peer's read takes ~0.2 ms per MiB; a wake-up tens of us): it yields too, for
  // at most kPullYield after the last activity, then sleeps (a peer late in its own code
  // must not cost this rank a core).
  bool readyToSleep() override;
  void addLink(UcxLink* link) { links_.push_back(link); }
  // A link posted a send: the window for yielding on pulled sends starts again.
  void noteActivity() { lastActivity_ = std::chrono::steady_clock::now(); }
  static constexpr std::chrono::microseconds kPullYield{1000};
  void removeLink(const UcxLink* link);
  // A link of this worker failed (UcxLink::quiesce): peers' frames may arrive that no
  // receive takes (the destructor says so once, instead of UCX's line per message).
  void noteFailure() { failed_ = true; }
  // Where the worker's own lines go (the communicator's logger); none by default.
  void setLog(spdlog::logger* log) { log_ = log; }

 private:
  // What the first context found UCX may use, which the second is configured for.
  struct Uses {
    bool eagerOnly = false;     // shared memory only: no UCX rendezvous
    bool tcp = false;           // tcp is among the transports
    bool tcpOnly = false;       // tcp is the one network transport
    bool sharedMemory = false;  // posix or sysv is among them
  };
  // The context, configured for `uses`; then its one worker.
  void initContext(const Uses& uses);
  void createWorker();
  // Shared memory only, where UCX_TLS is not set (the constructor's sharedMemory).
  bool sharedMemoryOnly_ = false;
  int rank_ = -1;
  static constexpr size_t kRecentErrors = 4;
  std::vector<std::string> recentErrors_;  // UCX's error lines in this progress (noteUcxError)
  std::string outOfMemory_;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  EventSet* events_ = nullptr;
  bool peerHandling_ = true;
  bool pullCapable_ = false;
  bool tcpSegmentsOurs_ = false;
  bool fragmentFrames_ = false;
  int sharedFifo_ = 0;
  int sharedRxGrow_ = 0;
  int efd_ = -1;
  bool frozen_ = false;
  bool failed_ = false;
  spdlog::logger* log_ = nullptr;
  std::chrono::steady_clock::time_point lastActivity_{};
  std::string transports_;
  std::vector<UcxLink*> links_;
};

class UcxLink final : public Link {
 public:
  static constexpr size_t kMaxQueued = 64;
  static constexpr size_t kMaxAbortText = 4096;
  // Data frames from this size are pulled (one copy, a system call and an answer) rather
  // than sent eagerly (two copies through UCX's queues): from 64 KiB the pull wins at n = 2
  // and 4 (docs/performance.md, "UCX's settings"), the smallest segment the engine cuts
  // where a block is larger.
  static constexpr size_t kPullMinBytes = size_t{64} << 10;

  // sendKey: the key the peer chose for what this rank sends it; recvKey: this rank's.
  // `sentinel` is the authenticated connection to the peer, registered in `events`.
  // `peerPid`: the peer's process id (address exchange), which a pull reads from;
  // `pullSends`: large data frames to the peer travel as descriptors (both ends agreed).
  UcxLink(std::shared_ptr<UcxWorker> worker, const std::string& peerAddress, uint32_t sendKey,
          uint32_t recvKey, Fd sentinel, EventSet& events, int peerRank, int jobSize, std::string name,
          int peerPid = 0, bool pullSends = false);
  ~UcxLink() override;

  void postSend(const void* data, size_t len, FrameType type) override;
  void postRecv(void* data, size_t len, FrameType type) override;
  uint64_t sendsDone() const override { return send_.done; }
  uint64_t recvsDone() const override { return recv_.done; }
  uint64_t sendsPosted() const override { return send_.posted; }
  uint64_t recvsPosted() const override { return recv_.posted; }
  bool progress() override;
  bool sendAbort(int originRank, rr_result_t code, uint64_t seq,
                 const std::string& reason) noexcept override;
  void startAbort(int originRank, rr_result_t code, uint64_t seq, const std::string& reason) noexcept override;
  bool finishAbort(std::chrono::steady_clock::time_point until) noexcept override;
  void shutdown() noexcept override;
  void beginQuiesce() noexcept override;
  void quiesce(std::chrono::steady_clock::time_point since) noexcept override;
  void startFarewell() noexcept override;
  void finishFarewell(std::chrono::steady_clock::time_point until) noexcept override;
  int peerRank() const override { return peerRank_; }
  // The lanes UCX chose for this endpoint (ucp_ep_print_info), one line.
  std::string lanes() const;
  bool peerFailureHandling() const { return peerMode_; }
  bool pullSends() const { return pull_; }
  bool prefersLargeFrames() const override { return pull_; }
  bool prefersFragmentFrames() const override { return worker_->fragmentFrames(); }
  // Every send still outstanding is a pulled one waiting for the peer to read it.
  bool sendsOnlyAwaitPulls() const;
  // Takes in what arrived on the control plane: answers a peer's farewell, notes the answer
  // to this rank's, keeps an abort frame for progress() to report. Called by every
  // progress of the worker, so that a rank answers while it waits on another link.
  void pollControl() noexcept;

 private:
  struct Op {
    void* request = nullptr;  // UCP request, or nullptr once completed
    size_t len = 0;
    FrameType type = FrameType::kData;
    bool complete = false;
    ucs_status_t failed = UCS_OK;  // a send UCX refused at once: reported by progress()
    void* data = nullptr;          // the receive's buffer (a pull reads into it)
    bool pull = false;             // a send announced by a descriptor, done when pulled
    uint64_t pullIndex = 0;        // its number among this link's pulled sends
    std::array<uint8_t, 32> desc{};
  };
  struct Sentinel final : EventTarget {
    void onEvent(uint32_t events) override;
    Fd fd;
    bool closed = false;
  };
  struct Direction {
    uint64_t posted = 0;
    uint64_t done = 0;
    std::array<Op, kMaxQueued> ops{};
  };

  static void onPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  uint64_t tag(uint32_t key, bool abort, FrameType type, uint64_t number) const;
  void postAbortRecv();
  // One message of the control plane, received with status `st`: acts on it, or throws a
  // protocol error naming the peer (kept for progress() to report).
  void takeControl(ucs_status_t st, const ucp_tag_recv_info_t& info);
  void checkAbort();
  bool sendControl(uint64_t what) noexcept;
  // Whether the peer closed the sentinel, waiting up to `waitMs` for it.
  bool sentinelGone(int waitMs = 0) noexcept;
  bool collect(Direction& dir, bool isSend);
  // Reads the frame a descriptor in `op.data` announces into `op.data`, then says so.
  void pull(Op& op);
  [[noreturn]] void peerLost(const std::string& what);
  // Freezes the worker (UcxWorker::freeze) if a request of this link that reads or writes
  // memory other than the link's own is still going: data sends not pulled, receives.
  void freezeIfCallerMemoryHeld() noexcept;
  // Closes the endpoint (forced with peer failure handling; without it, shared memory,
  // UCX refuses a forced close and flushes what is queued); waits until `until` at most,
  // then leaves a close still going to the control plane's requests.
  void closeEndpoint(std::chrono::steady_clock::time_point until) noexcept;

  std::shared_ptr<UcxWorker> worker_;
  ucp_ep_h ep_ = nullptr;
  uint32_t sendKey_;
  uint32_t recvKey_;
  int peerRank_;
  int jobSize_;  // bounds the ranks an abort frame may name
  std::string name_;
  Direction send_;
  Direction recv_;
  ucs_status_t peerStatus_ = UCS_OK;  // set by UCX's error handler
  bool peerMode_ = true;              // UCP_ERR_HANDLING_MODE_PEER, else NONE
  Sentinel sentinel_;
  EventSet& events_;
  std::unique_ptr<uint8_t[]> abortBuf_;
  void* abortRequest_ = nullptr;
  std::optional<Error> abortFrame_;     // arrived, not yet reported
  std::vector<void*> controlRequests_;  // farewells, their answers, aborts and closes still going
  void* abortSend_ = nullptr;           // startAbort's send, until finishAbort
  bool abortStarted_ = false;           // startAbort put a frame on its way (or sent it)
  // The abort frames this link sent: UCX reads a frame until its send completes, which a
  // peer that does not take in its queue can put off past sendAbort's wait; freed with the
  // link, after its endpoint is closed (a deque keeps each frame where it is).
  std::deque<std::string> abortFrames_;
  bool farewellAnswered_ = false;
  bool farewellSent_ = false;  // startFarewell sent one
  int peerPid_ = 0;
  bool pull_ = false;          // large data frames go as descriptors
  uint64_t pullsSent_ = 0;     // descriptors sent
  uint64_t pullsAcked_ = 0;    // "pulled" answers received
  uint64_t pullsRead_ = 0;     // descriptors of the peer's this link has read
  bool pullsRefused_ = false;  // the peer said it will read no more (it failed)
  bool quiesced_ = false;      // quiesce() gave up on the frames still announced
};

}  // namespace rr
