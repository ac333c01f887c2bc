// TcpLink: a Link striped over several TCP sockets (RR_SOCKETS_PER_LINK).
//
//   message (one transfer unit)  |------------- len bytes -------------|
//   stripes, at least 64 KiB     |-- socket 0 --|-- socket 1 --|-- 2 --|
//   on each socket, a frame      [type u32 | aux u32 | length u64] payload
//
// Both ends cut a message into the same stripes, so stripe i of every message travels on
// socket i and each socket carries frames in posting order. Sockets are non-blocking and
// registered edge-triggered in the engine's EventSet; progress() tries every socket that has
// work and returns when none can move. A receive that found its socket empty is not tried
// again until the EventSet reports new bytes on it (whoever owns the set dispatches it
// before looking again): an empty recv costs a syscall and the socket's lock, which the
// sender's delivery into it needs. Queues are fixed rings: no allocation per message.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "transport/link.h"
#include "transport/socket.h"

namespace rr {

class TcpLink final : public Link {
 public:
  static constexpr size_t kMinStripe = 64 * 1024;
  static constexpr size_t kMaxQueued = 64;  // messages in flight per direction
  // A frame up to this long is received in one recv, header and payload (through a bounce
  // buffer on the stack), instead of two; that recv also takes what follows the frame, up
  // to kAheadBytes (the data behind an op header, the next op's header), kept for the next
  // read of the socket.
  static constexpr size_t kBounceBytes = 4096;
  static constexpr size_t kAheadBytes = 16 + kBounceBytes;

  // Takes the connected sockets (socket i carries stripe i) and registers them in `events`.
  // `name` describes the peer in messages ("rank 3 (left neighbour)"); `jobSize` bounds the
  // ranks an abort frame may name.
  TcpLink(std::vector<Fd> sockets, EventSet& events, int peerRank, int jobSize, std::string name);
  ~TcpLink() override;

  void postSend(const void* data, size_t len, FrameType type) override;
  void postRecv(void* data, size_t len, FrameType type) override;
  uint64_t sendsDone() const override { return send_.done; }
  uint64_t recvsDone() const override { return recv_.done; }
  uint64_t sendsPosted() const override { return send_.posted; }
  uint64_t recvsPosted() const override { return recv_.posted; }
  bool progress() override;
  bool waitsForEvent() const override;
  bool sendAbort(int originRank, rr_result_t code, uint64_t seq,
                 const std::string& reason) noexcept override;
  void shutdown() noexcept override;
  int peerRank() const override { return peerRank_; }

 private:
  struct Stripe {
    uint8_t* data = nullptr;
    size_t len = 0;
    size_t moved = 0;  // header bytes and payload bytes moved so far
    uint64_t message = 0;
    FrameType type = FrameType::kData;
    std::array<uint8_t, 16> header{};
  };
  struct Socket final : EventTarget {
    void onEvent(uint32_t events) override;
    Fd fd;
    std::array<Stripe, kMaxQueued> sends{};
    std::array<Stripe, kMaxQueued> recvs{};
    uint64_t sendHead = 0, sendTail = 0;  // queue of stripes: [head, tail)
    uint64_t recvHead = 0, recvTail = 0;
    bool readable = true;   // set by epoll; a peek is due
    bool drained = false;   // a recv found nothing since epoll last said readable
    // Bytes of the stream read past a small frame, [aheadAt, aheadEnd): every read of this
    // socket (read(), takeAbortHeader()) takes them before the socket's.
    std::array<uint8_t, kAheadBytes> ahead{};
    size_t aheadAt = 0, aheadEnd = 0;
    size_t aheadBytes() const { return aheadEnd - aheadAt; }
    // Nothing to read until epoll reports new bytes: found empty since, none read ahead.
    bool waitsForEvent() const { return drained && aheadBytes() == 0; }
  };
  struct Direction {
    uint64_t posted = 0;
    uint64_t done = 0;
    std::array<uint32_t, kMaxQueued> stripesLeft{};
  };

  void post(Direction& dir, uint8_t* data, size_t len, FrameType type, bool isSend);
  void finishStripe(Direction& dir, uint64_t message);
  bool progressSend(Socket& s);
  bool progressRecv(Socket& s);
  void peekIdle(Socket& s);
  // Up to `want` bytes of the stream: those read ahead first, else one recv (its result).
  ssize_t read(Socket& s, uint8_t* dst, size_t want);
  // Whether the next frame (at a frame boundary) is an abort frame; if so its header is
  // taken from the stream into `header`.
  bool takeAbortHeader(Socket& s, uint8_t* header);
  // An abort frame's payload: `have` holds its first bytes where a recv took them already.
  [[noreturn]] void readAbort(Socket& s, const uint8_t* header, const uint8_t* have = nullptr,
                              size_t haveBytes = 0);
  // A frame's header (in st.header) against what was posted: an abort frame throws its
  // reason (its payload's first bytes in `payload`), another mismatch is a protocol error.
  void checkFrame(Socket& s, const Stripe& st, const uint8_t* payload, size_t payloadBytes);
  // Throws the abort frame a peer left at a frame boundary of any socket, if there is one:
  // a peer that fails sends it before its sockets close, so it explains a lost connection.
  void throwPendingAbort();
  [[noreturn]] void peerLost(const std::string& what);
  size_t stripeCount(size_t len) const;

  std::vector<std::unique_ptr<Socket>> sockets_;
  EventSet& events_;
  int peerRank_;
  int jobSize_;
  std::string name_;
  Direction send_;
  Direction recv_;
};

}  // namespace rr
