// The bootstrap messages; see bootstrap_wire.h.
#include "engine/setup/bootstrap_wire.h"

#include <algorithm>
#include <cstring>

#include "transport/interfaces.h"
#include "base/wire.h"

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

Arrival arrivalHere(const Endpoint& endpoint, TransportKind transport, const std::vector<JobSetting>& settings) {
  Arrival a{endpoint, namespaceInode("pid"), namespaceInode("ipc"), transport, {}};
  for (const JobSetting& s : settings) a.settings.emplace_back(static_cast<uint8_t>(s.id), s.value);
  return a;
}

std::string encodeArrival(const Arrival& a) {
  if (a.settings.size() > kMaxJobSettings)
    fail(RR_ERR_INTERNAL, "{} job-wide settings, at most {} fit an arrival", a.settings.size(), kMaxJobSettings);
  std::string out = encodeEndpoint(a.endpoint);
  uint8_t tail[kArrivalTail] = {};
  wire::put64(tail, a.pidNamespace);
  wire::put64(tail + 8, a.ipcNamespace);
  tail[16] = static_cast<uint8_t>(a.transport);
  tail[17] = static_cast<uint8_t>(a.settings.size());
  for (size_t i = 0; i < a.settings.size(); ++i) {
    tail[18 + 9 * i] = a.settings[i].first;
    wire::put64(tail + 18 + 9 * i + 1, a.settings[i].second);
  }
  out.append(reinterpret_cast<const char*>(tail), sizeof tail);
  return out;
}

void decodeArrivalTail(const uint8_t* tail, Arrival& a, const std::string& what) {
  if (tail[16] > static_cast<uint8_t>(TransportKind::kEither))
    fail(RR_ERR_SYSTEM, "protocol error: {} sent transport {}", what, tail[16]);
  if (tail[17] > kMaxJobSettings)
    fail(RR_ERR_SYSTEM, "protocol error: {} sent {} job-wide settings (at most {})", what, tail[17], kMaxJobSettings);
  a.pidNamespace = wire::get64(tail);
  a.ipcNamespace = wire::get64(tail + 8);
  a.transport = static_cast<TransportKind>(tail[16]);
  a.settings.clear();
  for (size_t i = 0; i < tail[17]; ++i) {
    const uint8_t id = tail[18 + 9 * i];
    for (const auto& [seen, value] : a.settings)
      if (seen == id) fail(RR_ERR_SYSTEM, "protocol error: {} sent job-wide setting #{} twice", what, id);
    a.settings.emplace_back(id, wire::get64(tail + 18 + 9 * i + 1));
  }
}

std::string settingsMismatch(const std::vector<Arrival>& table, TransportKind jobTransport) {
  const auto kindName = [](TransportKind k) { return k == TransportKind::kUcx ? "ucx" : "tcp"; };
  // Ranks that run one transport only, each a different one: no link can form.
  for (size_t r = 0; r < table.size(); ++r) {
    if (table[r].transport == TransportKind::kEither) continue;
    for (size_t q = r + 1; q < table.size(); ++q)
      if (table[q].transport != TransportKind::kEither && table[q].transport != table[r].transport)
        return fmt::format("rank {} uses the {} transport, rank {} uses {} (RR_TRANSPORT, or a build or host "
                           "without UCX): every rank must use the same",
                           q, kindName(table[q].transport), r, kindName(table[r].transport));
  }
  const auto find = [](const Arrival& a, uint8_t id) -> const uint64_t* {
    for (const auto& [seen, value] : a.settings)
      if (seen == id) return &value;
    return nullptr;
  };
  const Arrival& zero = table[0];
  for (size_t r = 1; r < table.size(); ++r) {
    for (const auto& [id, value] : zero.settings) {
      if (jobSettingTcpOnly(id) && jobTransport != TransportKind::kTcp) continue;
      const uint64_t* theirs = find(table[r], id);
      if (theirs == nullptr)
        return fmt::format("rank {} does not report {} (a build of another protocol?)", r,
                           jobSettingText(id, value).substr(0, jobSettingText(id, value).find('=')));
      if (*theirs != value)
        return fmt::format("ranks differ in a job-wide setting: rank 0 has {}, rank {} has {} (it must be the same on "
                           "every rank)",
                           jobSettingText(id, value), r, jobSettingText(id, *theirs));
    }
    for (const auto& [id, value] : table[r].settings)
      if (find(zero, id) == nullptr)
        return fmt::format("rank {} reports {}, which rank 0 does not know (a build of another protocol?)", r,
                           jobSettingText(id, value));
  }
  return "";
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
