// POSIX socket helpers; see socket.h.
#include "transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/error.h"

namespace rr {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

uint16_t SockAddr::port() const {
  if (storage.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
}

void SockAddr::setPort(uint16_t port) {
  if (storage.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  else
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
}

std::string SockAddr::ip() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof buf);
  else if (storage.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof buf);
  return buf;
}

std::string SockAddr::str() const {
  if (storage.ss_family == AF_INET6) return fmt::format("[{}]:{}", ip(), port());
  return fmt::format("{}:{}", ip(), port());
}

std::pair<std::string, std::string> splitHostPort(const std::string& hostPort, const char* what) {
  std::string host, port;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':')
      fail(RR_ERR_INVALID_ARGUMENT, "{} '{}' is not host:port or [ipv6]:port", what, hostPort);
    host = hostPort.substr(1, close - 1);
    port = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    if (colon == std::string::npos || colon == 0)
      fail(RR_ERR_INVALID_ARGUMENT, "{} '{}' is not host:port", what, hostPort);
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  char* end = nullptr;
  long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 0 || value > 65535)
    fail(RR_ERR_INVALID_ARGUMENT, "{} '{}': port '{}' is not a number in 0..65535", what, hostPort,
         port);
  return {host, port};
}

namespace {

bool waitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, msUntil(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) failErrno(errno, "poll");
  }
}

}  // namespace

SockAddr resolve(const std::string& hostPort, const char* what) {
  auto [host, port] = splitHostPort(hostPort, what);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    fail(RR_ERR_INVALID_ARGUMENT, "{} '{}': cannot resolve host '{}': {}", what, hostPort, host,
         gai_strerror(rc));
  SockAddr addr;
  std::memcpy(&addr.storage, res->ai_addr, res->ai_addrlen);
  addr.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return addr;
}

SockAddr makeAddr(const std::string& ip, uint16_t port) {
  SockAddr addr;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    addr.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    addr.len = sizeof(sockaddr_in6);
  } else {
    fail(RR_ERR_INVALID_ARGUMENT, "'{}' is not a numeric IP address", ip);
  }
  addr.setPort(port);
  return addr;
}

Fd bindTo(const SockAddr& addr) {
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) failErrno(errno, "socket");
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
    failErrno(errno, "setsockopt SO_REUSEADDR");
  if (::bind(fd.get(), addr.get(), addr.len) != 0)
    failErrno(errno, fmt::format("bind to {}", addr.str()));
  return fd;
}

Fd listenOn(const SockAddr& addr, int backlog) {
  Fd fd = bindTo(addr);
  if (::listen(fd.get(), backlog) != 0) failErrno(errno, fmt::format("listen on {}", addr.str()));
  return fd;
}

SockAddr localAddr(int fd) {
  SockAddr addr;
  addr.len = sizeof addr.storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr.storage), &addr.len) != 0)
    failErrno(errno, "getsockname");
  return addr;
}

SockAddr peerAddr(int fd) {
  SockAddr addr;
  addr.len = sizeof addr.storage;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr.storage), &addr.len) != 0)
    addr.len = 0;
  return addr;
}

void setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) failErrno(errno, "fcntl");
}

void setNoDelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    failErrno(errno, "setsockopt TCP_NODELAY");
}

Fd connectTo(const SockAddr& addr, Deadline deadline, const std::string& what) {
  int lastErr = 0;
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) failErrno(errno, "socket");
    int rc = ::connect(fd.get(), addr.get(), addr.len);
    if (rc != 0 && errno == EINPROGRESS) {
      if (waitFor(fd.get(), POLLOUT, deadline)) {
        socklen_t len = sizeof rc;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &rc, &len);
        if (rc != 0) errno = rc;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      int flags = ::fcntl(fd.get(), F_GETFL);
      ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      return fd;
    }
    lastErr = errno;
    if (lastErr != ECONNREFUSED && lastErr != ENETUNREACH && lastErr != EHOSTUNREACH &&
        lastErr != ETIMEDOUT && lastErr != ECONNRESET && lastErr != EAGAIN)
      failErrno(lastErr, fmt::format("connect to {} at {}", what, addr.str()));
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  fail(RR_ERR_TIMEOUT, "could not connect to {} at {} before the deadline (last error: {})", what,
       addr.str(), std::strerror(lastErr));
}

Fd acceptUntil(int listenFd, Deadline deadline) {
  for (;;) {
    if (!waitFor(listenFd, POLLIN, deadline)) return Fd();
    int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return Fd(fd);
    if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) failErrno(errno, "accept");
  }
}

void sendAll(int fd, const void* data, size_t len, Deadline deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!waitFor(fd, POLLOUT, deadline)) fail(RR_ERR_TIMEOUT, "timed out sending to {}", what);
    } else if (errno == EPIPE || errno == ECONNRESET) {
      fail(RR_ERR_PEER_LOST, "connection to {} was closed", what);
    } else {
      failErrno(errno, fmt::format("send to {}", what));
    }
  }
}

void recvAll(int fd, void* data, size_t len, Deadline deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      fail(RR_ERR_PEER_LOST, "connection closed by {}", what);
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!waitFor(fd, POLLIN, deadline)) fail(RR_ERR_TIMEOUT, "timed out waiting for {}", what);
    } else if (errno == ECONNRESET) {
      fail(RR_ERR_PEER_LOST, "connection reset by {}", what);
    } else {
      failErrno(errno, fmt::format("recv from {}", what));
    }
  }
}

}  // namespace rr
