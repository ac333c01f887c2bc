// The messages of the bootstrap connections after the handshake (docs/design.md, "Wire
// formats"), all
// little-endian, field by field:
//
//   rank r -> rank 0   arrival    endpoint: port u16 | length u8 (1..64) | numeric IP,
//                                 then pid namespace u64 | IPC namespace u64 (inodes; 0:
//                                 unknown) | transport u8 (TransportKind: tcp, ucx, either)
//                                 | settings count u8 (<= kMaxJobSettings) | kMaxJobSettings
//                                 x (id u8 | value u64), the first `count` used, the rest 0
//                                 (the job-wide settings, config.h: JobSetting)
//                                 or length 0, then a status: why rank r cannot join
//   rank 0 -> rank r   verdict    ranks u32 (the job's size) | the job's transport u8 (tcp
//                                 or ucx: what a rank of "either" runs) | the right
//                                 neighbour's endpoint | the endpoint of each recursive
//                                 doubling partner that r connects to, in rdPartners order
//                                 (both sides know how many)
//                                 or ranks 0, then a status: why the job cannot form
//   both ways          status     code u32 (RR_SUCCESS or the failure) | length u32 | text
//
// After the ring is connected, each rank sends rank 0 a status, and after a success its
// links' traits (u32; bit 0, kTraitLargeFrames: every link of the rank prefers large
// frames; bit 1, kTraitOneHost: every peer the rank connected to published the same IP as
// the rank itself; bit 2, kTraitFragmentFrames: every link of the rank prefers frames that
// fit one of its transport's fragments, Link::prefersFragmentFrames; a build from before
// bit 2 never sets it, so the AND is clear wherever one takes part and every rank still cuts
// alike: the protocol version stayed); rank 0 answers every rank with the first failure, or with success and
// the traits every rank has (the AND of all, rank 0's own included) (bootstrap.cc); then
// the connection carries the stall monitor's reports (stall_monitor.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/setup/config.h"
#include "base/error.h"
#include "transport/socket.h"
#include "transport/transport.h"

namespace rr {

constexpr size_t kMaxStatusText = 4096;
constexpr uint32_t kTraitLargeFrames = 1;
constexpr uint32_t kTraitOneHost = 2;
constexpr uint32_t kTraitFragmentFrames = 4;
constexpr size_t kMaxEndpointIp = 64;

// A rank that reached rank 0 but cannot take part: the job cannot form.
class JoinFailed : public Error {
 public:
  using Error::Error;
};

// What a rank publishes at the rendezvous: where its transport listens, where it runs (its
// namespaces: ranks that share a host and these may share memory) and which transport it
// runs (TransportKind).
struct Arrival {
  Endpoint endpoint;
  uint64_t pidNamespace = 0;
  uint64_t ipcNamespace = 0;
  TransportKind transport = TransportKind::kTcp;
  std::vector<std::pair<uint8_t, uint64_t>> settings{};  // (JobSettingId, value)
};
constexpr size_t kMaxJobSettings = 8;
constexpr size_t kArrivalTail = 18 + 9 * kMaxJobSettings;  // the bytes after the endpoint

// This process's arrival with `endpoint`, `transport` and its job-wide settings.
Arrival arrivalHere(const Endpoint& endpoint, TransportKind transport, const std::vector<JobSetting>& settings);
// At rank 0, once every rank arrived: why the ranks cannot form one job because a job-wide
// setting differs ("ranks differ in a job-wide setting: rank 0 has RR_ALGO=rd, rank 2 has
// RR_ALGO=ring ..."), or "". `jobTransport`: the job's transport (settings that only matter
// over TCP are compared only there); ranks that run TCP only beside ranks that run UCX
// only are named too.
std::string settingsMismatch(const std::vector<Arrival>& table, TransportKind jobTransport);
std::string encodeEndpoint(const Endpoint& e);
std::string encodeArrival(const Arrival& a);
// The arrival's tail (kArrivalTail bytes) into `a`; throws RR_ERR_SYSTEM for a malformed one.
void decodeArrivalTail(const uint8_t* tail, Arrival& a, const std::string& what);
// Rank 0 -> rank r after the rendezvous: the job's size and transport, r's right neighbour
// and the partners r connects to, or (a size of 0, then a status) why the job cannot form.
std::string encodeVerdict(int size, TransportKind transport, const Endpoint& right,
                          const std::vector<Endpoint>& partners = {});
std::string encodeJobFailed(const Error& why);
std::string encodeStatus(rr_result_t code, const std::string& text);
// The status whose 8-byte head is `head`; throws RR_ERR_SYSTEM for a malformed one.
// statusLength gives the length of the text that follows.
size_t statusLength(const uint8_t* head, const std::string& what);
Error decodeStatus(const uint8_t* head, std::string text);

void sendArrival(int fd, const Arrival& a, Deadline deadline, const std::string& what);
// An endpoint of the verdict. Throws JoinFailed when the sender says it cannot join.
Endpoint recvEndpoint(int fd, Deadline deadline, const std::string& what);
// The verdict's transport byte.
TransportKind recvJobTransport(int fd, Deadline deadline, const std::string& what);
void sendStatus(int fd, rr_result_t code, const std::string& text, Deadline deadline,
                const std::string& what);
Error recvStatus(int fd, Deadline deadline, const std::string& what);
// Best effort, bounded: a failing rank tells the other end why before it closes.
void tryStatus(int fd, const Error& e, const std::string& what);
// Rank r -> rank 0 after the handshake, instead of its endpoint.
void sendJoinError(int fd, const Error& e);

}  // namespace rr
