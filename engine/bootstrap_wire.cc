// The bootstrap messages; see bootstrap_wire.h.
#include "engine/bootstrap_wire.h"

#include <algorithm>
#include <cstring>

#include "transport/interfaces.h"
#include "transport/wire.h"

namespace rr {

std::string encodeEndpoint(const Endpoint& e) {
  const size_t len = std::min(e.ip.size(), kMaxEndpointIp);
  std::string out(3 + len, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  wire::put16(p, e.port);
  p[2] = static_cast<uint8_t>(len);
  std::memcpy(p + 3, e.ip.data(), len);
  return out;
}

Arrival arrivalHere(const Endpoint& endpoint, TransportKind transport) {
  return Arrival{endpoint, namespaceInode("pid"), namespaceInode("ipc"), transport};
}

std::string encodeArrival(const Arrival& a) {
  std::string out = encodeEndpoint(a.endpoint);
  uint8_t tail[kArrivalTail];
  wire::put64(tail, a.pidNamespace);
  wire::put64(tail + 8, a.ipcNamespace);
  tail[16] = static_cast<uint8_t>(a.transport);
  out.append(reinterpret_cast<const char*>(tail), sizeof tail);
  return out;
}

void decodeArrivalTail(const uint8_t* tail, Arrival& a, const std::string& what) {
  if (tail[16] > static_cast<uint8_t>(TransportKind::kEither))
    fail(RR_ERR_SYSTEM, "protocol error: {} sent transport {}", what, tail[16]);
  a.pidNamespace = wire::get64(tail);
  a.ipcNamespace = wire::get64(tail + 8);
  a.transport = static_cast<TransportKind>(tail[16]);
}

std::string encodeStatus(rr_result_t code, const std::string& text) {
  const std::string t = text.substr(0, kMaxStatusText);
  std::string out(8 + t.size(), '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  wire::put32(p, static_cast<uint32_t>(code));
  wire::put32(p + 4, static_cast<uint32_t>(t.size()));
  std::memcpy(p + 8, t.data(), t.size());
  return out;
}

std::string encodeVerdict(int size, TransportKind transport, const Endpoint& right,
                          const std::vector<Endpoint>& partners) {
  std::string out(5, '\0');
  wire::put32(reinterpret_cast<uint8_t*>(out.data()), static_cast<uint32_t>(size));
  out[4] = static_cast<char>(transport);
  out += encodeEndpoint(right);
  for (const Endpoint& e : partners) out += encodeEndpoint(e);
  return out;
}

std::string encodeJobFailed(const Error& why) {
  return std::string(4, '\0') + encodeStatus(why.code(), why.what());
}

size_t statusLength(const uint8_t* head, const std::string& what) {
  const uint32_t code = wire::get32(head), len = wire::get32(head + 4);
  if (code > RR_ERR_INTERNAL || len > kMaxStatusText)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent a status of code {} and {} bytes", what, code, len);
  return len;
}

Error decodeStatus(const uint8_t* head, std::string text) {
  return Error(static_cast<rr_result_t>(wire::get32(head)), std::move(text));
}

void sendArrival(int fd, const Arrival& a, Deadline deadline, const std::string& what) {
  const std::string m = encodeArrival(a);
  sendAll(fd, m.data(), m.size(), deadline, what);
}

void sendStatus(int fd, rr_result_t code, const std::string& text, Deadline deadline,
                const std::string& what) {
  const std::string m = encodeStatus(code, text);
  sendAll(fd, m.data(), m.size(), deadline, what);
}

Error recvStatus(int fd, Deadline deadline, const std::string& what) {
  uint8_t head[8];
  recvAll(fd, head, 8, deadline, what);
  std::string text(statusLength(head, what), '\0');
  recvAll(fd, text.data(), text.size(), deadline, what);
  return decodeStatus(head, std::move(text));
}

void tryStatus(int fd, const Error& e, const std::string& what) {
  try {
    sendStatus(fd, e.code(), e.what(), deadlineIn(500), what);
  } catch (const Error&) {
  }
}

void sendJoinError(int fd, const Error& e) {
  uint8_t head[3] = {0, 0, 0};
  try {
    sendAll(fd, head, 3, deadlineIn(500), "rank 0");
  } catch (const Error&) {
    return;
  }
  tryStatus(fd, e, "rank 0");
}

Endpoint recvEndpoint(int fd, Deadline deadline, const std::string& what) {
  uint8_t head[3];
  recvAll(fd, head, 3, deadline, what);
  if (head[2] == 0) {  // the rank could not join, and says why
    const Error e = recvStatus(fd, deadline, what);
    throw JoinFailed(e.code(), fmt::format("{} cannot join: {}", what, e.what()));
  }
  if (head[2] > kMaxEndpointIp)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent an address of {} bytes", what, head[2]);
  Endpoint e;
  e.port = wire::get16(head);
  e.ip.resize(head[2]);
  recvAll(fd, e.ip.data(), head[2], deadline, what);
  makeAddr(e.ip, e.port);  // throws unless it is a numeric address
  return e;
}

TransportKind recvJobTransport(int fd, Deadline deadline, const std::string& what) {
  uint8_t t = 0;
  recvAll(fd, &t, 1, deadline, what);
  if (t != static_cast<uint8_t>(TransportKind::kTcp) && t != static_cast<uint8_t>(TransportKind::kUcx))
    fail(RR_ERR_SYSTEM, "protocol error: {} chose transport {}", what, t);
  return static_cast<TransportKind>(t);
}

}  // namespace rr
