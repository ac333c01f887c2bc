// TcpLink; see tcp_link.h for the picture.
#include "transport/tcp/tcp_link.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/test_lies.h"
#include "base/wire.h"

namespace rr {
namespace {

constexpr size_t kHeader = 16;
constexpr size_t kMaxAbortText = 4096;

// Sends all of [p, p + len) while the peer keeps reading: each 64 KiB must go within 100 ms
// (a link of 10 Mbit/s still moves it), and all of it by `until`. A peer that has stopped
// reading (frozen) costs 100 ms, not the whole bound.
void sendWhileRead(int fd, const uint8_t* p, size_t len, Deadline until, const std::string& what) {
  constexpr size_t kStep = size_t{64} << 10;
  for (size_t at = 0; at < len; at += kStep)
    sendAll(fd, p + at, std::min(kStep, len - at), std::min(until, deadlineIn(100)), what);
}

}  // namespace

void TcpLink::Socket::onEvent(uint32_t events) {
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
    readable = true;
    drained = false;
  }
}

TcpLink::TcpLink(std::vector<Fd> sockets, EventSet& events, int peerRank, int jobSize, std::string name)
    : events_(events), peerRank_(peerRank), jobSize_(jobSize), name_(std::move(name)) {
  for (auto& fd : sockets) {
    auto s = std::make_unique<Socket>();
    s->fd = std::move(fd);
    setNonBlocking(s->fd.get());
    setNoDelay(s->fd.get());
    events_.add(s->fd.get(), EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, s.get());
    sockets_.push_back(std::move(s));
  }
}

TcpLink::~TcpLink() {
  for (auto& s : sockets_) events_.remove(s->fd.get());
}

size_t TcpLink::stripeCount(size_t len) const {
  return std::clamp<size_t>(len / kMinStripe, 1, sockets_.size());
}

void TcpLink::post(Direction& dir, uint8_t* data, size_t len, FrameType type, bool isSend) {
  if (dir.posted - dir.done >= kMaxQueued)
    fail(RR_ERR_INTERNAL, "more than {} messages queued on the link to {}", kMaxQueued, name_);
  const uint64_t message = dir.posted++;
  const size_t stripes = stripeCount(len);
  dir.stripesLeft[message % kMaxQueued] = static_cast<uint32_t>(stripes);
  for (size_t i = 0; i < stripes; ++i) {
    const size_t begin = i * (len / stripes) + std::min(i, len % stripes);
    const size_t size = len / stripes + (i < len % stripes ? 1 : 0);
    Socket& s = *sockets_[i];
    Stripe& st = isSend ? s.sends[s.sendTail++ % kMaxQueued] : s.recvs[s.recvTail++ % kMaxQueued];
    st.data = data + begin;
    st.len = size;
    st.moved = 0;
    st.message = message;
    st.type = type;
    wire::put32(st.header.data(), static_cast<uint32_t>(type));
    wire::put32(st.header.data() + 4, 0);
    wire::put64(st.header.data() + 8, size);
  }
}

void TcpLink::postSend(const void* data, size_t len, FrameType type) {
  lieAboutData(data, len, type);
  post(send_, static_cast<uint8_t*>(const_cast<void*>(data)), len, type, true);
}

void TcpLink::postRecv(void* data, size_t len, FrameType type) {
  post(recv_, static_cast<uint8_t*>(data), len, type, false);
}

void TcpLink::finishStripe(Direction& dir, uint64_t message) {
  --dir.stripesLeft[message % kMaxQueued];
  while (dir.done < dir.posted && dir.stripesLeft[dir.done % kMaxQueued] == 0) ++dir.done;
}

bool TcpLink::progress() {
  bool moved = false;
  for (auto& s : sockets_) {
    moved |= progressSend(*s);
    moved |= progressRecv(*s);
  }
  return moved;
}

bool TcpLink::waitsForEvent() const {
  for (const auto& s : sockets_)
    if (s->waitsForEvent() && s->recvHead < s->recvTail) return true;
  return false;
}

bool TcpLink::progressSend(Socket& s) {
  // Every queued stripe of this socket in one sendmsg, up to kBatch of them: an op header
  // and the data behind it leave in one call (one loopback delivery, one packet where they fit).
  constexpr size_t kBatch = 8;
  bool moved = false;
  while (s.sendHead < s.sendTail) {
    iovec iov[2 * kBatch];
    size_t n = 0;
    for (uint64_t i = s.sendHead; i < s.sendTail && i < s.sendHead + kBatch; ++i) {
      Stripe& st = s.sends[i % kMaxQueued];
      if (st.moved < kHeader) {
        iov[n++] = {st.header.data() + st.moved, kHeader - st.moved};
        if (st.len > 0) iov[n++] = {st.data, st.len};
      } else {
        iov[n++] = {st.data + (st.moved - kHeader), st.len - (st.moved - kHeader)};
      }
    }
    size_t want = 0;
    for (size_t i = 0; i < n; ++i) want += iov[i].iov_len;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t sent = ::sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      if (errno == EPIPE || errno == ECONNRESET)
        peerLost(fmt::format("lost the connection to {}: {}", name_, std::strerror(errno)));
      failErrno(errno, fmt::format("send to {}", name_));
    }
    moved = true;
    // Hand the bytes sent to the stripes in order; fewer than asked means the socket
    // buffer is full (epoll says when it has room again).
    size_t left = static_cast<size_t>(sent);
    while (left > 0) {
      Stripe& st = s.sends[s.sendHead % kMaxQueued];
      const size_t take = std::min(left, kHeader + st.len - st.moved);
      st.moved += take;
      left -= take;
      if (st.moved < kHeader + st.len) break;
      ++s.sendHead;
      finishStripe(send_, st.message);
    }
    if (static_cast<size_t>(sent) < want) break;
  }
  return moved;
}

bool TcpLink::progressRecv(Socket& s) {
  if (s.recvHead == s.recvTail) {
    if (s.readable) peekIdle(s);
    return false;
  }
  if (s.waitsForEvent()) return false;  // found empty, no report since (tcp_link.h)
  bool moved = false;
  while (s.recvHead < s.recvTail) {
    Stripe& st = s.recvs[s.recvHead % kMaxQueued];
    // A small frame comes whole in one recv, into a bounce buffer: its payload is copied
    // out once its frame header is checked (nothing lands in the receiver's memory before).
    // With nothing read ahead, that recv asks for the bytes behind the frame too.
    const bool whole = st.moved == 0 && st.len <= kBounceBytes;
    uint8_t bounce[kHeader + kBounceBytes + kAheadBytes];
    uint8_t* dst;
    size_t want;
    if (whole) {
      dst = bounce;
      want = kHeader + st.len;
    } else if (st.moved < kHeader) {
      dst = st.header.data() + st.moved;
      want = kHeader - st.moved;
    } else {
      dst = st.data + (st.moved - kHeader);
      want = st.len - (st.moved - kHeader);
    }
    ssize_t got = 0;
    if (whole && s.aheadBytes() == 0) {
      got = ::recv(s.fd.get(), bounce, want + kAheadBytes, MSG_DONTWAIT);
      if (got > static_cast<ssize_t>(want)) {
        s.aheadAt = 0;
        s.aheadEnd = static_cast<size_t>(got) - want;
        std::memcpy(s.ahead.data(), bounce + want, s.aheadEnd);
        got = static_cast<ssize_t>(want);
      }
    } else if (want > 0) {
      got = read(s, dst, want);
    }
    if (want > 0 && got == 0)
      peerLost(fmt::format("{} closed the connection while this rank waited for {} from it", name_,
                           st.type == FrameType::kOpHeader ? "an op header" : "data"));
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        s.readable = false;
        s.drained = errno == EAGAIN;
        break;
      }
      if (errno == ECONNRESET) peerLost(fmt::format("connection reset by {}", name_));
      failErrno(errno, fmt::format("recv from {}", name_));
    }
    moved = true;
    const size_t n = static_cast<size_t>(got);
    if (whole) std::memcpy(st.header.data(), bounce, std::min(n, kHeader));
    const bool hadHeader = st.moved >= kHeader;
    st.moved += n;
    if (!hadHeader && st.moved >= kHeader) {
      const size_t payload = st.moved - kHeader;  // some only when it came whole
      checkFrame(s, st, bounce + kHeader, payload);
      if (payload > 0) std::memcpy(st.data, bounce + kHeader, payload);
    }
    if (st.moved < kHeader + st.len) continue;
    ++s.recvHead;
    finishStripe(recv_, st.message);
  }
  return moved;
}

ssize_t TcpLink::read(Socket& s, uint8_t* dst, size_t want) {
  if (s.aheadBytes() == 0) return ::recv(s.fd.get(), dst, want, MSG_DONTWAIT);
  const size_t n = std::min(want, s.aheadBytes());
  std::memcpy(dst, s.ahead.data() + s.aheadAt, n);
  s.aheadAt += n;
  if (s.aheadAt == s.aheadEnd) s.aheadAt = s.aheadEnd = 0;
  return static_cast<ssize_t>(n);
}

bool TcpLink::takeAbortHeader(Socket& s, uint8_t* header) {
  const size_t have = std::min(s.aheadBytes(), kHeader);
  std::memcpy(header, s.ahead.data() + s.aheadAt, have);
  if (have < kHeader &&
      ::recv(s.fd.get(), header + have, kHeader - have, MSG_PEEK | MSG_DONTWAIT) != static_cast<ssize_t>(kHeader - have))
    return false;
  if (wire::get32(header) != static_cast<uint32_t>(FrameType::kAbort)) return false;
  if (have > 0) read(s, header, have);
  if (have < kHeader) ::recv(s.fd.get(), header + have, kHeader - have, MSG_DONTWAIT);
  return true;
}

void TcpLink::peekIdle(Socket& s) {
  uint8_t header[kHeader];
  const bool abort = takeAbortHeader(s, header);
  s.readable = false;
  // A close seen here is not an error yet: the next send or receive on this socket reports
  // it, and only if the socket is needed again.
  if (abort) readAbort(s, header);
}

void TcpLink::checkFrame(Socket& s, const Stripe& st, const uint8_t* payload, size_t payloadBytes) {
  const uint32_t type = wire::get32(st.header.data());
  const uint64_t len = wire::get64(st.header.data() + 8);
  if (type == static_cast<uint32_t>(FrameType::kAbort)) readAbort(s, st.header.data(), payload, payloadBytes);
  if (type != static_cast<uint32_t>(st.type) || len != st.len)
    fail(RR_ERR_SYSTEM,
         "protocol error: expected a {} frame of {} bytes from {}, got a {} frame (type {}) "
         "of {} bytes",
         frameName(static_cast<uint32_t>(st.type)), st.len, name_, frameName(type), type, len);
}

void TcpLink::readAbort(Socket& s, const uint8_t* header, const uint8_t* have, size_t haveBytes) {
  const uint64_t len = wire::get64(header + 8);
  if (len < 16 || len > 16 + kMaxAbortText)
    fail(RR_ERR_SYSTEM, "protocol error: abort frame of {} bytes from {}", len, name_);
  haveBytes = std::min<size_t>(haveBytes, len);
  std::string payload(len, '\0');
  if (haveBytes > 0) std::memcpy(payload.data(), have, haveBytes);
  auto* rest = reinterpret_cast<uint8_t*>(payload.data());
  if (len > haveBytes && s.aheadBytes() > 0)
    haveBytes += static_cast<size_t>(read(s, rest + haveBytes, len - haveBytes));
  try {
    if (len > haveBytes) recvAll(s.fd.get(), rest + haveBytes, len - haveBytes, deadlineIn(1000), name_);
  } catch (const Error&) {
    fail(RR_ERR_PEER_LOST, "{} aborted without a readable reason", name_);
  }
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  throw abortFrameError(static_cast<int32_t>(wire::get32(p)), wire::get32(p + 4), wire::get64(p + 8),
                        payload.substr(16), name_, jobSize_);
}

void TcpLink::throwPendingAbort() {
  for (auto& s : sockets_) {
    if (s->recvHead < s->recvTail && s->recvs[s->recvHead % kMaxQueued].moved > 0) continue;
    uint8_t header[kHeader];
    if (takeAbortHeader(*s, header)) readAbort(*s, header);
  }
}

void TcpLink::peerLost(const std::string& what) {
  throwPendingAbort();
  throw Error(RR_ERR_PEER_LOST, what);
}

bool TcpLink::sendAbort(int originRank, rr_result_t code, uint64_t seq,
                        const std::string& reason) noexcept {
  try {
    const std::string text = lying("abort-long") ? std::string(kMaxAbortText + 64, 'x') : reason.substr(0, kMaxAbortText);
    std::string frame(kHeader + 16 + text.size(), '\0');
    auto* p = reinterpret_cast<uint8_t*>(frame.data());
    wire::put32(p, static_cast<uint32_t>(FrameType::kAbort));
    wire::put32(p + 4, 0);
    wire::put64(p + 8, 16 + text.size());
    wire::put32(p + 16, static_cast<uint32_t>(lyingOrigin(originRank)));
    wire::put32(p + 20, static_cast<uint32_t>(code));
    wire::put64(p + 24, seq);
    std::memcpy(p + 32, text.data(), text.size());
    // One deadline per attempt for the whole link, not per socket: a peer that does not read
    // (frozen) reads none of them, and the caller gets its error only after this returns
    // (it once took 1 s with two sockets mid-frame to a stopped neighbour).
    const Deadline atBoundary = deadlineIn(100);
    for (auto& s : sockets_) {
      // Only at a frame boundary: a frame cut in the middle would corrupt the stream.
      if (s->sendHead < s->sendTail && s->sends[s->sendHead % kMaxQueued].moved > 0) continue;
      try {
        sendAll(s->fd.get(), frame.data(), frame.size(), atBoundary, name_);
        return true;
      } catch (const Error&) {
      }
    }
    // Every socket is in the middle of a frame (a failure mid-transfer): finish the one in
    // flight on the first socket (its bytes are still valid: the failed pass has not
    // returned its buffers yet), then the abort follows at that frame's boundary.
    const Deadline until = deadlineIn(1000);
    for (auto& s : sockets_) {
      if (s->sendHead >= s->sendTail) continue;
      const Stripe& st = s->sends[s->sendHead % kMaxQueued];
      try {
        if (st.moved < kHeader) {
          sendWhileRead(s->fd.get(), st.header.data() + st.moved, kHeader - st.moved, until, name_);
          sendWhileRead(s->fd.get(), st.data, st.len, until, name_);
        } else {
          sendWhileRead(s->fd.get(), st.data + (st.moved - kHeader), st.len - (st.moved - kHeader), until, name_);
        }
        sendWhileRead(s->fd.get(), p, frame.size(), until, name_);
        return true;
      } catch (const Error&) {
      }
    }
  } catch (...) {
  }
  return false;
}

void TcpLink::shutdown() noexcept {
  for (auto& s : sockets_) ::shutdown(s->fd.get(), SHUT_RDWR);
}

}  // namespace rr
