// An in-memory Link pair, for tests and fuzz targets that drive the engine's agreement
// without processes or sockets (test/test_agreement.cc, fuzz/fuzz_agreement.cc). Frames move
// between the two ends through queues of a shared wire, under one lock, and are checked as
// a TCP link checks them (transport/tcp/tcp_link.h): a frame must have exactly the type and
// length of the receive it meets, an abort frame is reported as the peer's failure
// (abortFrameError), and a receive outstanding when the peer has closed is RR_ERR_PEER_LOST.
// A send completes at once (the wire has room for everything).
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/wire.h"
#include "transport/link.h"

namespace rr::test {

struct MemoryWire {
  struct Frame {
    uint32_t type;
    std::vector<uint8_t> bytes;
  };
  std::mutex mutex;
  std::deque<Frame> toward[2];     // frames on their way to end 0 and to end 1
  bool closed[2] = {false, false};  // that end was shut down

  // A frame as a peer at `from` would send it (any type: the receiver checks it).
  void push(int from, uint32_t type, const void* data, size_t len) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto* p = static_cast<const uint8_t*>(data);
    toward[1 - from].push_back(Frame{type, std::vector<uint8_t>(p, p + len)});
  }
};

class MemoryLink final : public Link {
 public:
  MemoryLink(std::shared_ptr<MemoryWire> wire, int end, int peerRank, int jobSize, std::string name)
      : wire_(std::move(wire)), end_(end), peerRank_(peerRank), jobSize_(jobSize), name_(std::move(name)) {}

  // The two ends of a new wire: the first at rank `a` (its peer `b`, which it calls
  // `whatAtA`: "right neighbour"), the second at `b`.
  static std::pair<std::unique_ptr<MemoryLink>, std::unique_ptr<MemoryLink>> pair(int a, int b, int jobSize,
                                                                                const std::string& whatAtA,
                                                                                const std::string& whatAtB) {
    auto wire = std::make_shared<MemoryWire>();
    return {std::make_unique<MemoryLink>(wire, 0, b, jobSize, "rank " + std::to_string(b) + " (" + whatAtA + ")"),
            std::make_unique<MemoryLink>(wire, 1, a, jobSize, "rank " + std::to_string(a) + " (" + whatAtB + ")")};
  }
  MemoryWire& wire() { return *wire_; }
  int end() const { return end_; }

  void postSend(const void* data, size_t len, FrameType type) override {
    lieAboutData(data, len, type);
    wire_->push(end_, static_cast<uint32_t>(type), data, len);
    ++sendsPosted_;
    ++sendsDone_;
  }
  void postRecv(void* data, size_t len, FrameType type) override {
    recvs_.push_back(Recv{static_cast<uint8_t*>(data), len, type});
    ++recvsPosted_;
  }
  uint64_t sendsDone() const override { return sendsDone_; }
  uint64_t recvsDone() const override { return recvsDone_; }
  uint64_t sendsPosted() const override { return sendsPosted_; }
  uint64_t recvsPosted() const override { return recvsPosted_; }

  bool progress() override {
    std::lock_guard<std::mutex> lock(wire_->mutex);
    auto& in = wire_->toward[end_];
    bool moved = false;
    while (!in.empty()) {
      MemoryWire::Frame& f = in.front();
      if (f.type == static_cast<uint32_t>(FrameType::kAbort)) {
        const MemoryWire::Frame abort = std::move(f);
        in.pop_front();
        if (abort.bytes.size() < 16) fail(RR_ERR_SYSTEM, "protocol error: abort frame of {} bytes from {}", abort.bytes.size(), name_);
        const uint8_t* p = abort.bytes.data();
        throw abortFrameError(static_cast<int32_t>(wire::get32(p)), wire::get32(p + 4), wire::get64(p + 8),
                              std::string(abort.bytes.begin() + 16, abort.bytes.end()), name_, jobSize_);
      }
      if (recvs_.empty()) break;
      const Recv r = recvs_.front();
      if (f.type != static_cast<uint32_t>(r.type) || f.bytes.size() != r.len)
        fail(RR_ERR_SYSTEM, "protocol error: expected a {} frame of {} bytes from {}, got a {} frame (type {}) of {} bytes",
             frameName(static_cast<uint32_t>(r.type)), r.len, name_, frameName(f.type), f.type, f.bytes.size());
      if (r.len > 0) std::memcpy(r.data, f.bytes.data(), r.len);
      in.pop_front();
      recvs_.pop_front();
      ++recvsDone_;
      moved = true;
    }
    if (!recvs_.empty() && in.empty() && wire_->closed[1 - end_])
      fail(RR_ERR_PEER_LOST, "{} closed the connection while this rank waited for a frame from it", name_);
    return moved;
  }

  bool sendAbort(int originRank, rr_result_t code, uint64_t seq, const std::string& reason) noexcept override {
    try {
      std::vector<uint8_t> frame(16 + reason.size());
      wire::put32(frame.data(), static_cast<uint32_t>(originRank));
      wire::put32(frame.data() + 4, static_cast<uint32_t>(code));
      wire::put64(frame.data() + 8, seq);
      std::memcpy(frame.data() + 16, reason.data(), reason.size());
      wire_->push(end_, static_cast<uint32_t>(FrameType::kAbort), frame.data(), frame.size());
      return true;
    } catch (...) {
      return false;
    }
  }
  void shutdown() noexcept override {
    std::lock_guard<std::mutex> lock(wire_->mutex);
    wire_->closed[end_] = true;
  }
  int peerRank() const override { return peerRank_; }

 private:
  struct Recv {
    uint8_t* data;
    size_t len;
    FrameType type;
  };
  std::shared_ptr<MemoryWire> wire_;
  int end_;
  int peerRank_;
  int jobSize_;
  std::string name_;
  std::deque<Recv> recvs_;
  uint64_t sendsPosted_ = 0, sendsDone_ = 0, recvsPosted_ = 0, recvsDone_ = 0;
};

}  // namespace rr::test
