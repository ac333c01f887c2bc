// A connected TCP pair on 127.0.0.1 for the fuzz targets: feed() writes the fuzz input from
// one end and closes it; the code under test reads from the other end, fd().
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "transport/socket.h"

namespace rr {

class LoopbackPair {
 public:
  LoopbackPair() {
    static Fd listener = listenOn(makeAddr("127.0.0.1", 0), 64);
    const SockAddr addr = localAddr(listener.get());
    writer_ = connectTo(addr, deadlineIn(1000), "fuzz listener");
    reader_ = acceptUntil(listener.get(), deadlineIn(1000));
  }
  void feed(const uint8_t* data, size_t size) {
    // Loopback buffers hold far more than libFuzzer's default maximum input.
    if (size > 0) sendAll(writer_.get(), data, size, deadlineIn(1000), "fuzz reader");
    ::shutdown(writer_.get(), SHUT_WR);
  }
  int fd() const { return reader_.get(); }
  Fd take() { return std::move(reader_); }

 private:
  Fd writer_;
  Fd reader_;
};

}  // namespace rr
