// UcxLink; see ucx_link.h (UcxWorker: ucx_worker.cc).
#include "transport/ucx/ucx_link.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/test_lies.h"
#include "transport/ucx/ucx_print.h"
#include "base/wire.h"

namespace rr {
namespace {

constexpr uint64_t kNumberBits = 28;
constexpr uint64_t kNumberMask = (uint64_t{1} << kNumberBits) - 1;
constexpr uint64_t kTypeShift = kNumberBits;
constexpr uint64_t kTypeMask = uint64_t{7} << kTypeShift;
constexpr uint64_t kAbortBit = uint64_t{1} << 31;
// On the control plane (the abort bit set) the message number says what a message is.
constexpr uint64_t kControlAbort = 0;
constexpr uint64_t kControlFarewell = 1;
constexpr uint64_t kControlFarewellAnswer = 2;
constexpr uint64_t kControlPulled = 3;   // one announced frame was read
constexpr uint64_t kControlNoPulls = 4;  // this rank failed: it reads nothing more
// A data frame announced by a descriptor, on the data plane: the type field's value 4 (the
// frame types are 1-3). The descriptor: magic, 0, address, length, number (little-endian).
constexpr uint32_t kPullType = 4;
constexpr uint32_t kPullMagic = 0x52525031;  // "RRP1"
constexpr size_t kPullDescBytes = 32;
// How long a failed link waits for a live peer to read, or refuse, what it announced.
constexpr int kPullQuiesceMs = 500;

using Clock = std::chrono::steady_clock;

// Progresses the worker until `request` is no longer in progress or `until` has passed;
// returns its status then (UCS_INPROGRESS if it is still going). A frozen worker is not
// waited on.
ucs_status_t awaitRequest(UcxWorker& worker, void* request, Clock::time_point until) noexcept {
  ucs_status_t st;
  while ((st = ucp_request_check_status(request)) == UCS_INPROGRESS && !worker.frozen() &&
         Clock::now() < until)
    if (!worker.progressOnce()) std::this_thread::yield();
  return st;
}

// Waits until a request from a teardown call completes, at most until `until`; frees it
// (UCX releases a request freed unfinished when it ends). Teardown must not hang on a peer
// that is gone.
void finishRequest(UcxWorker& worker, void* request, Clock::time_point until) noexcept {
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  awaitRequest(worker, request, until);
  ucp_request_free(request);
}

}  // namespace

void UcxLink::Sentinel::onEvent(uint32_t events) {
  if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) closed = true;
}

UcxLink::UcxLink(std::shared_ptr<UcxWorker> worker, const std::string& peerAddress,
                 uint32_t sendKey, uint32_t recvKey, Fd sentinel, EventSet& events, int peerRank, int jobSize,
                 std::string name, int peerPid, bool pullSends)
    : worker_(std::move(worker)),
      sendKey_(sendKey),
      recvKey_(recvKey),
      peerRank_(peerRank),
      jobSize_(jobSize),
      name_(std::move(name)),
      events_(events),
      abortBuf_(new uint8_t[16 + kMaxAbortText]),
      peerPid_(peerPid),
      pull_(pullSends) {
  worker_->addLink(this);
  sentinel_.fd = std::move(sentinel);
  events_.add(sentinel_.fd.get(), EPOLLRDHUP | EPOLLET, &sentinel_);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxLink::onPeerError;
  ep.err_handler.arg = this;
  if (!worker_->peerFailureHandling()) {  // shared memory only: the sentinel tells
    peerMode_ = false;
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.field_mask &= ~static_cast<uint64_t>(UCP_EP_PARAM_FIELD_ERR_HANDLER);
  }
  const ucs_status_t st = ucp_ep_create(worker_->worker(), &ep, &ep_);
  if (st != UCS_OK) {
    events_.remove(sentinel_.fd.get());
    worker_->removeLink(this);
    fail(st == UCS_ERR_UNREACHABLE ? RR_ERR_INVALID_ARGUMENT : RR_ERR_PEER_LOST,
         "UCX: cannot create the endpoint to {}{} over {}: {}: either {} sent a UCX worker address this UCX "
         "cannot read (the ranks' UCX versions differ, or the peer broke the protocol), or UCX_TLS names "
         "transports without peer failure handling (e.g. shared memory) next to others: use UCX_TLS=sm for "
         "shared memory alone, or network transports alone",
         name_, peerMode_ ? " with peer failure handling" : "", worker_->transports(), ucs_status_string(st), name_);
  }
  postAbortRecv();
}

UcxLink::~UcxLink() {
  ucp_worker_h w = worker_->worker();
  for (Direction* dir : {&send_, &recv_})
    for (Op& op : dir->ops)
      if (op.request != nullptr) ucp_request_cancel(w, op.request);
  if (abortRequest_ != nullptr) ucp_request_cancel(w, abortRequest_);
  // One bound for everything still going: each request's wait progresses them all.
  const auto until = Clock::now() + std::chrono::milliseconds(500);
  closeEndpoint(until);
  UcxWorker& worker = *worker_;
  for (Direction* dir : {&send_, &recv_})
    for (Op& op : dir->ops) {
      // A request still going holds memory that goes back now (the caller's buffer, the
      // engine's staging, or the descriptor in this link): nothing may move it any more.
      if (op.request != nullptr && ucp_request_check_status(op.request) == UCS_INPROGRESS) worker.freeze();
      finishRequest(worker, op.request, until);
      op.request = nullptr;
    }
  finishRequest(worker, abortRequest_, until);
  // So does an abort frame still queued (abortFrames_ goes with the link; the control
  // requests do not say which is the frame's, so any still going counts).
  for (void* r : controlRequests_)
    if (ucp_request_check_status(r) == UCS_INPROGRESS && !abortFrames_.empty()) worker.freeze();
  if (abortSend_ != nullptr && ucp_request_check_status(abortSend_) == UCS_INPROGRESS) worker.freeze();
  finishRequest(worker, abortSend_, until);
  for (void* r : controlRequests_) finishRequest(worker, r, until);
  events_.remove(sentinel_.fd.get());
  worker_->removeLink(this);
}

void UcxLink::onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<UcxLink*>(arg)->peerStatus_ = status;
}

uint64_t UcxLink::tag(uint32_t key, bool abort, FrameType type, uint64_t number) const {
  return (uint64_t{key} << 32) | (abort ? kAbortBit : 0) |
         (uint64_t{static_cast<uint32_t>(type) & 7} << kTypeShift) | (number & kNumberMask);
}

void UcxLink::postSend(const void* data, size_t len, FrameType type) {
  lieAboutData(data, len, type);
  if (send_.posted - send_.done >= kMaxQueued)
    fail(RR_ERR_INTERNAL, "more than {} sends queued to {}", kMaxQueued, name_);
  Op& op = send_.ops[send_.posted % kMaxQueued];
  op = Op{nullptr, len, type, false};
  worker_->noteActivity();
  ucp_request_param_t param{};
  ucs_status_ptr_t r;
  if ((pull_ || lying("pull-unagreed")) && type == FrameType::kData && len >= kPullMinBytes) {
    op.pull = true;
    op.pullIndex = pullsSent_++;
    uint8_t* d = op.desc.data();
    wire::put32(d, lying("pull-magic") ? kPullMagic + 1 : kPullMagic);
    wire::put32(d + 4, 0);
    wire::put64(d + 8, reinterpret_cast<uintptr_t>(data));
    wire::put64(d + 16, lying("pull-length") ? len + 4096 : len);
    wire::put64(d + 24, op.pullIndex);
    r = ucp_tag_send_nbx(ep_, d, kPullDescBytes, tag(sendKey_, false, static_cast<FrameType>(kPullType), send_.posted), &param);
    if (UCS_PTR_IS_ERR(r))
      op.failed = UCS_PTR_STATUS(r);
    else
      op.request = r;  // complete once the request is (if any) and the peer said "pulled"
    ++send_.posted;
    return;
  }
  r = ucp_tag_send_nbx(ep_, data, len, tag(sendKey_, false, type, send_.posted), &param);
  // A send refused at once (the peer is gone) fails in progress(), as every other loss
  // does, so that the engine can look for the abort frame that explains it.
  if (UCS_PTR_IS_ERR(r))
    op.failed = UCS_PTR_STATUS(r);
  else if (r == nullptr)
    op.complete = true;
  else
    op.request = r;
  ++send_.posted;
}

void UcxLink::postRecv(void* data, size_t len, FrameType type) {
  if (recv_.posted - recv_.done >= kMaxQueued)
    fail(RR_ERR_INTERNAL, "more than {} receives queued from {}", kMaxQueued, name_);
  Op& op = recv_.ops[recv_.posted % kMaxQueued];
  op = Op{nullptr, len, type, false};
  op.data = data;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  const uint64_t mask = ~kTypeMask;  // key, plane and number must match; the type is checked
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_->worker(), data, len,
                                        tag(recvKey_, false, FrameType::kData, recv_.posted), mask, &param);
  if (UCS_PTR_IS_ERR(r))
    fail(RR_ERR_SYSTEM, "UCX: posting a receive of {} bytes from {} failed: {}", len, name_,
         ucs_status_string(UCS_PTR_STATUS(r)));
  op.request = r;
  ++recv_.posted;
}

void UcxLink::postAbortRecv() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  const uint64_t mask = ~uint64_t{0} << 31;  // the key and the abort plane
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_->worker(), abortBuf_.get(), 16 + kMaxAbortText,
                                        tag(recvKey_, true, FrameType::kAbort, 0), mask, &param);
  if (UCS_PTR_IS_ERR(r))
    fail(RR_ERR_SYSTEM, "UCX: posting the abort receive from {} failed: {}", name_,
         ucs_status_string(UCS_PTR_STATUS(r)));
  abortRequest_ = r;
}

void UcxLink::pollControl() noexcept {
  controlRequests_.erase(std::remove_if(controlRequests_.begin(), controlRequests_.end(),
                                        [](void* r) {
                                          if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
                                          ucp_request_free(r);
                                          return true;
                                        }),
                         controlRequests_.end());
  while (abortRequest_ != nullptr) {
    ucp_tag_recv_info_t info{};
    const ucs_status_t st = ucp_tag_recv_request_test(abortRequest_, &info);
    if (st == UCS_INPROGRESS) return;
    ucp_request_free(abortRequest_);
    abortRequest_ = nullptr;
    if (st == UCS_ERR_CANCELED) return;  // the link is closing
    try {
      takeControl(st, info);
    } catch (const Error& e) {  // a protocol error the peer made: reported by progress(), the first one
      if (!abortFrame_) abortFrame_ = e;
    } catch (...) {
    }
    // Posted again on every path, after an abort or a malformed message too: a peer's
    // farewell must still find it.
    try {
      postAbortRecv();
    } catch (const Error&) {
      return;  // no control plane any more: a loss is still seen, its reason not
    }
  }
}

void UcxLink::takeControl(ucs_status_t st, const ucp_tag_recv_info_t& info) {
  const uint64_t what = info.sender_tag & kNumberMask;
  if (st == UCS_ERR_MESSAGE_TRUNCATED)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent a control message (number {}) longer than the {} bytes of an abort frame",
         name_, what, 16 + kMaxAbortText);
  if (st != UCS_OK) return;  // a receive UCX ended otherwise: the link's loss is reported by progress()
  if (what == kControlAbort) {
    if (info.length < 16)
      fail(RR_ERR_SYSTEM, "protocol error: {} sent an abort frame of {} bytes (at least 16)", name_, info.length);
    if (abortFrame_) return;  // the first one counts
    const uint8_t* p = abortBuf_.get();
    abortFrame_ = abortFrameError(static_cast<int32_t>(wire::get32(p)), wire::get32(p + 4), wire::get64(p + 8),
                                  std::string(reinterpret_cast<const char*>(p + 16), info.length - 16), name_, jobSize_);
    return;
  }
  if (what > kControlNoPulls || info.length != 0)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent control message number {} of {} bytes (known: 0-{}, empty but the abort)",
         name_, what, info.length, kControlNoPulls);
  if (what == kControlFarewell) {
    sendControl(kControlFarewellAnswer);
  } else if (what == kControlFarewellAnswer) {
    farewellAnswered_ = true;
  } else if (what == kControlPulled) {
    if (pullsAcked_ >= pullsSent_ && !quiesced_)
      fail(RR_ERR_SYSTEM, "protocol error: {} said it read a frame of this rank's that was never announced", name_);
    ++pullsAcked_;
  } else if (what == kControlNoPulls) {
    pullsRefused_ = true;
  }
}

// Throws the abort frame the peer sent, if one has arrived (once).
void UcxLink::checkAbort() {
  pollControl();
  if (!abortFrame_) return;
  const Error e = *abortFrame_;
  abortFrame_.reset();
  throw e;
}

bool UcxLink::sendControl(uint64_t what) noexcept {
  if (ep_ == nullptr) return false;
  ucp_request_param_t param{};
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep_, nullptr, 0, tag(sendKey_, true, FrameType::kAbort, what), &param);
  if (UCS_PTR_IS_ERR(r)) return false;
  if (r != nullptr) controlRequests_.push_back(r);
  return true;
}

bool UcxLink::sentinelGone(int waitMs) noexcept {
  if (sentinel_.closed) return true;
  pollfd p{sentinel_.fd.get(), POLLRDHUP, 0};
  if (::poll(&p, 1, waitMs) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) sentinel_.closed = true;
  return sentinel_.closed;
}

// UCX completes a send once the bytes left the caller's buffer, not once the peer took
// them in: a process that then destroys its worker and exits can take them with it (over
// shared memory the peer then fails to attach this process's segment). A slower neighbour
// still in the previous collective lost its data so. So before the endpoint closes, this
// rank tells the peer and waits, bounded, for the answer: tag messages on one endpoint
// arrive in order, so the answer means everything sent before has been taken in. A peer
// that is gone, or that closed its side first (it needs nothing more), ends the wait.
void UcxLink::startFarewell() noexcept {
  farewellSent_ = false;
  if (ep_ == nullptr || peerStatus_ != UCS_OK || worker_->frozen() || sentinelGone()) return;
  farewellSent_ = sendControl(kControlFarewell);
}

void UcxLink::finishFarewell(std::chrono::steady_clock::time_point until) noexcept {
  if (!farewellSent_) return;
  while (!farewellAnswered_ && peerStatus_ == UCS_OK && !worker_->frozen() && std::chrono::steady_clock::now() < until) {
    const bool any = worker_->progress();
    worker_->pollControls();  // answers every link's farewells meanwhile, this one's included
    if (farewellAnswered_ || sentinelGone(any ? 0 : 1)) break;
  }
}

// Retires finished requests in posting order; true if any did.
bool UcxLink::collect(Direction& dir, bool isSend) {
  bool any = false;
  bool pulled = false;
  while (dir.done < dir.posted) {
    Op& op = dir.ops[dir.done % kMaxQueued];
    if (!op.complete) {
      if (op.failed != UCS_OK)
        peerLost(fmt::format("sending {} bytes to {} failed: {}", op.len, name_, ucs_status_string(op.failed)));
      if (isSend) {
        if (op.request != nullptr) {
          const ucs_status_t st = ucp_request_check_status(op.request);
          if (st == UCS_INPROGRESS) break;
          ucp_request_free(op.request);
          op.request = nullptr;
          if (st != UCS_OK)
            peerLost(fmt::format("sending {} bytes to {} failed: {}", op.len, name_, ucs_status_string(st)));
        }
        if (op.pull && pullsAcked_ <= op.pullIndex) break;  // announced, not yet read
      } else {
        ucp_tag_recv_info_t info{};
        // One pull per call: the engine reduces and forwards what arrived before the next
        // read (pulling every announced frame in a row held the pipeline up).
        if (pulled) break;
        const ucs_status_t st = ucp_tag_recv_request_test(op.request, &info);
        if (st == UCS_INPROGRESS) break;
        ucp_request_free(op.request);
        op.request = nullptr;
        if (st == UCS_ERR_MESSAGE_TRUNCATED)
          fail(RR_ERR_SYSTEM, "protocol error: {} sent a frame longer than the {} bytes expected",
               name_, op.len);
        if (st != UCS_OK)
          peerLost(fmt::format("receiving {} bytes from {} failed: {}", op.len, name_, ucs_status_string(st)));
        const uint32_t type = static_cast<uint32_t>((info.sender_tag & kTypeMask) >> kTypeShift);
        if (type == kPullType && !pull_)  // only where both ends agreed pulls at init, from a proven process
          fail(RR_ERR_SYSTEM, "protocol error: {} sent a frame descriptor (a pull) on a link where pulls were not agreed",
               name_);
        if (type == kPullType && op.type == FrameType::kData && info.length == kPullDescBytes) {
          pull(op);
          pulled = true;
        }
        else if (type != static_cast<uint32_t>(op.type) || info.length != op.len)
          fail(RR_ERR_SYSTEM, "protocol error: expected a {} frame of {} bytes from {}, got a {} frame of {} bytes",
               frameName(static_cast<uint32_t>(op.type)), op.len, name_, frameName(type), info.length);
      }
      op.complete = true;
    }
    ++dir.done;
    any = true;
  }
  return any;
}

bool UcxLink::progress() {
  bool moved = worker_->progress();
  checkAbort();
  if (!worker_->outOfMemory().empty() && (send_.done < send_.posted || recv_.done < recv_.posted))
    fail(RR_ERR_SYSTEM, "{}", worker_->outOfMemory());
  // A peer that is gone fails the link only while it has work outstanding: one that
  // finished the last collective and left is the next collective's to report.
  moved |= collect(send_, true);
  moved |= collect(recv_, false);
  if (peerStatus_ != UCS_OK && (send_.done < send_.posted || recv_.done < recv_.posted))
    peerLost(fmt::format("lost the connection to {} (UCX: {})", name_, ucs_status_string(peerStatus_)));
  if (sentinel_.closed && !moved && (send_.done < send_.posted || recv_.done < recv_.posted))
    peerLost(fmt::format("{} closed its connection (the process ended or its communicator was "
                         "destroyed) with {} sends and {} receives of this link unfinished",
                         name_, send_.posted - send_.done, recv_.posted - recv_.done));
  return moved;
}

void UcxLink::pull(Op& op) {
  uint8_t d[kPullDescBytes];
  std::memcpy(d, op.data, kPullDescBytes);  // the buffer it arrived in is about to be filled
  const uint64_t addr = wire::get64(d + 8);
  const uint64_t len = wire::get64(d + 16);
  const uint64_t number = wire::get64(d + 24);
  if (wire::get32(d) != kPullMagic || number != pullsRead_)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent a malformed frame descriptor (magic {:#x}, number {}; expected {:#x}, {})",
         name_, wire::get32(d), number, kPullMagic, pullsRead_);
  if (len != op.len)
    fail(RR_ERR_SYSTEM, "protocol error: expected a data frame of {} bytes from {}, got a data frame of {} bytes",
         op.len, name_, len);
  if (addr == 0 || addr + len < addr || peerPid_ <= 0 || peerPid_ == ::getpid())
    fail(RR_ERR_SYSTEM, "protocol error: {} announced a frame at address {:#x} ({} bytes) of process {}, which this rank "
         "does not read", name_, addr, len, peerPid_);
  size_t got = 0;
  while (got < len) {
    iovec local{static_cast<uint8_t*>(op.data) + got, len - got};
    iovec remote{reinterpret_cast<void*>(addr + got), len - got};
    const ssize_t k = ::process_vm_readv(peerPid_, &local, 1, &remote, 1, 0);
    if (k > 0) {
      got += static_cast<size_t>(k);
      continue;
    }
    const int err = k < 0 ? errno : EIO;
    if (err == EINTR) continue;
    if (err == EPERM)
      fail(RR_ERR_SYSTEM,
           "reading the {} bytes that {} (process {}) announced was refused by the kernel ({}): this process "
           "may not read its memory (ptrace restrictions, or another user); leave cma out of UCX_TLS "
           "(UCX_TLS=posix,sysv,self) to send through shared-memory queues instead",
           len, name_, peerPid_, std::strerror(err));
    peerLost(fmt::format("{} (process {}) is gone or let go of its memory: reading the {} bytes it announced "
                         "failed after {}: {}",
                         name_, peerPid_, len, got, std::strerror(err)));
  }
  ++pullsRead_;
  sendControl(kControlPulled);
}

bool UcxLink::sendsOnlyAwaitPulls() const {
  for (uint64_t i = send_.done; i < send_.posted; ++i) {
    const Op& op = send_.ops[i % kMaxQueued];
    const bool awaiting = op.pull && !op.complete && op.failed == UCS_OK && pullsAcked_ <= op.pullIndex &&
                          (op.request == nullptr || ucp_request_check_status(op.request) != UCS_INPROGRESS);
    if (!awaiting) return false;
  }
  return true;
}

void UcxLink::peerLost(const std::string& what) {
  worker_->progress();
  checkAbort();  // an abort frame the peer left explains the loss
  throw Error(RR_ERR_PEER_LOST, what);
}

bool UcxLink::sendAbort(int originRank, rr_result_t code, uint64_t seq,
                        const std::string& reason) noexcept {
  startAbort(originRank, code, seq, reason);
  return finishAbort(Clock::now() + std::chrono::milliseconds(100));
}

void UcxLink::startAbort(int originRank, rr_result_t code, uint64_t seq,
                         const std::string& reason) noexcept {
  abortStarted_ = false;
  try {
    if (peerStatus_ != UCS_OK || ep_ == nullptr) return;
    const std::string text = lying("abort-long") ? std::string(kMaxAbortText + 64, 'x') : reason.substr(0, kMaxAbortText);
    std::string& frame = abortFrames_.emplace_back(16 + text.size(), '\0');
    auto* p = reinterpret_cast<uint8_t*>(frame.data());
    wire::put32(p, static_cast<uint32_t>(lyingOrigin(originRank)));
    wire::put32(p + 4, static_cast<uint32_t>(code));
    wire::put64(p + 8, seq);
    std::memcpy(p + 16, text.data(), text.size());
    ucp_request_param_t param{};
    ucs_status_ptr_t r = ucp_tag_send_nbx(ep_, frame.data(), frame.size(),
                                          tag(sendKey_, true, FrameType::kAbort, kControlAbort), &param);
    if (UCS_PTR_IS_ERR(r)) return;
    abortSend_ = r;
    abortStarted_ = true;
  } catch (...) {
  }
}

bool UcxLink::finishAbort(Clock::time_point until) noexcept {
  if (!abortStarted_) return false;
  abortStarted_ = false;
  void* r = std::exchange(abortSend_, nullptr);
  if (r == nullptr) return true;
  const ucs_status_t st = awaitRequest(*worker_, r, until);
  // Still queued (the peer's queue full while it is busy elsewhere or stopped): UCX
  // cannot cancel a send, and would copy the frame out later, so the request stays with
  // the control plane's and the frame with the link until the endpoint is closed.
  if (st == UCS_INPROGRESS) {
    controlRequests_.push_back(r);
    return false;
  }
  ucp_request_free(r);
  return st == UCS_OK;
}

void UcxLink::closeEndpoint(Clock::time_point until) noexcept {
  if (ep_ == nullptr) return;
  // UCX 1.13 refuses a forced close ("Invalid parameter", the endpoint left open) where
  // the endpoint has no peer failure handling: there it flushes what is queued first.
  ucp_request_param_t param{};
  if (peerMode_) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  void* r = ucp_ep_close_nbx(ep_, &param);
  ep_ = nullptr;
  if (r == nullptr || UCS_PTR_IS_ERR(r)) return;  // an endpoint UCX did not close goes with the worker
  if (awaitRequest(*worker_, r, until) == UCS_INPROGRESS)
    controlRequests_.push_back(r);  // a flush to a peer that takes nothing in
  else
    ucp_request_free(r);
}

// The peer sees the loss through the sentinel; a close that waits for a peer taking
// nothing in goes on without the caller.
void UcxLink::shutdown() noexcept { closeEndpoint(Clock::now()); }

void UcxLink::beginQuiesce() noexcept {
  // A peer may still read what this link announced: tell it this rank reads no more of
  // its frames (quiesce waits, bounded, until it has read or refused ours).
  if (pull_) sendControl(kControlNoPulls);
}

void UcxLink::quiesce(Clock::time_point since) noexcept {
  worker_->noteFailure();
  ucp_worker_h w = worker_->worker();
  const auto pullUntil = since + std::chrono::milliseconds(kPullQuiesceMs);
  // The sends' bounds below follow the pulls' where this link had pulls to wait for.
  const auto sendsFrom = pullsAcked_ < pullsSent_ ? pullUntil : since;
  while (pullsAcked_ < pullsSent_ && !pullsRefused_ && peerStatus_ == UCS_OK && !sentinelGone() &&
         !worker_->frozen() && Clock::now() < pullUntil) {
    if (!worker_->progressOnce()) std::this_thread::yield();
    worker_->pollControls();
  }
  pullsAcked_ = pullsSent_;
  quiesced_ = true;  // a "pulled" may still come for a frame given up on here
  auto pending = [&] {
    int n = 0;
    for (Direction* dir : {&send_, &recv_})
      for (Op& op : dir->ops)
        if (op.request != nullptr) {
          if (ucp_request_check_status(op.request) == UCS_INPROGRESS) {
            ++n;
          } else {
            ucp_request_free(op.request);
            op.request = nullptr;
          }
        }
    return n;
  };
  for (Op& op : recv_.ops)
    if (op.request != nullptr) ucp_request_cancel(w, op.request);
  // Sends end on their own (delivered, or failed by peer failure handling); what is left
  // after a while ends when the endpoint is closed. The bounds count from `since`, the
  // moment the rank failed, for every link alike (each wait progresses them all).
  auto drain = [&](Clock::time_point until) {
    while (pending() > 0 && !worker_->frozen() && Clock::now() < until)
      if (!worker_->progressOnce()) std::this_thread::yield();
  };
  if (peerMode_) {
    // With peer failure handling a send to a dead peer fails soon, and a forced close
    // ends the rest (cancelled).
    drain(sendsFrom + std::chrono::milliseconds(200));
    if (pending() > 0) {
      closeEndpoint(Clock::now());
      drain(sendsFrom + std::chrono::milliseconds(700));
    }
  } else if (pending() > 0) {
    // Without it (shared memory) a send waits for the peer to take it in, for ever if the
    // peer is stopped, and no close cancels it: the peer has until the pulls' bound (500
    // ms from the failure, as before this bound was shared), then the close goes on without
    // this rank (its sends stay queued with the endpoint; UCX frees them with the worker).
    closeEndpoint(Clock::now());
    drain(pullUntil);
  }
  freezeIfCallerMemoryHeld();  // the buffers go back to the caller next
  send_.done = send_.posted;  // nothing is outstanding any more
  recv_.done = recv_.posted;
}

void UcxLink::freezeIfCallerMemoryHeld() noexcept {
  for (Direction* dir : {&send_, &recv_})
    for (const Op& op : dir->ops)
      if (op.request != nullptr && !(dir == &send_ && op.pull) &&
          ucp_request_check_status(op.request) == UCS_INPROGRESS)
        worker_->freeze();
}

std::string UcxLink::lanes() const {
  if (ep_ == nullptr) return "closed";
  const std::string text = printed([&](FILE* f) { ucp_ep_print_info(ep_, f); });
  // Keep the lane lines ("lane[0]: 2:tcp/lo.0 md[0] ..."), as "tcp/lo, posix/memory, ...".
  std::string out;
  size_t pos = 0;
  while ((pos = text.find("lane[", pos)) != std::string::npos) {
    const size_t colon = text.find(": ", pos);
    const size_t end = text.find('\n', pos);
    if (colon == std::string::npos || colon > end) break;
    std::string lane = text.substr(colon + 2, end - colon - 2);
    lane.erase(0, lane.find_first_not_of(' '));
    lane = lane.substr(0, lane.find(' '));                      // "2:tcp/lo.0"
    if (const size_t c = lane.find(':'); c != std::string::npos) lane.erase(0, c + 1);
    if (out.find(lane) == std::string::npos) out += (out.empty() ? "" : ", ") + lane;
    pos = end;
  }
  return out.empty() ? "none listed" : out;
}

}  // namespace rr
