// Plain POSIX socket helpers shared by the bootstrap and the TCP transport: an owning fd,
// address parsing, and blocking-with-deadline send/recv/connect/accept built on poll(2).
// Everything that can block takes a deadline and throws RR_ERR_TIMEOUT past it.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "base/clock.h"

namespace rr {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string ip() const;
  std::string str() const;  // "1.2.3.4:80" or "[::1]:80"
};

// "host:port" or "[v6]:port" split into host (without brackets) and port, unresolved.
// Throws RR_ERR_INVALID_ARGUMENT naming `what`.
std::pair<std::string, std::string> splitHostPort(const std::string& hostPort, const char* what);
// "host:port" or "[v6]:port"; the host may be a name. Throws RR_ERR_INVALID_ARGUMENT.
SockAddr resolve(const std::string& hostPort, const char* what);
// A numeric IP and a port.
SockAddr makeAddr(const std::string& ip, uint16_t port);

// A stream socket (close-on-exec) with SO_REUSEADDR, bound to addr; throws RR_ERR_SYSTEM
// naming the call and the address. listenOn is bindTo and listen(2).
Fd bindTo(const SockAddr& addr);
Fd listenOn(const SockAddr& addr, int backlog);
SockAddr localAddr(int fd);
SockAddr peerAddr(int fd);
void setNonBlocking(int fd);
void setNoDelay(int fd);

// Connects, retrying refused or unreachable attempts until the deadline.
Fd connectTo(const SockAddr& addr, Deadline deadline, const std::string& what);
// Waits for one connection; returns an empty Fd at the deadline.
Fd acceptUntil(int listenFd, Deadline deadline);
// Blocking transfers of exactly len bytes. `what` names the peer for the error message.
void sendAll(int fd, const void* data, size_t len, Deadline deadline, const std::string& what);
void recvAll(int fd, void* data, size_t len, Deadline deadline, const std::string& what);

}  // namespace rr
