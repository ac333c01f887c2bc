// acceptConcurrently: the server side of the TCP data links (and of UCX's address exchange).
// Accepts connections on a listening socket and runs each one's handshake on a thread of its
// own (at most kMaxPending at once), so a client that sends garbage or stalls in the middle
// of the handshake holds up nobody but itself, and only until the handshake deadline. A
// client that sends nothing within a short first-byte deadline gives its slot back, and
// where every slot is taken the oldest silent one gives its slot to the newcomer: a flood
// of silent connections (which needs no secret) cannot keep a ring peer out, whose hello
// comes at once, and a peer turned away tries again (dialPeer, handshake.h). Every
// rejection is counted, and the first ones logged with the peer's address.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "transport/handshake.h"
#include "transport/socket.h"

namespace spdlog {
class logger;
}

namespace rr {

struct AcceptCallbacks {
  // Under the acceptor's lock, once the HMAC checked out: "" admits the peer (and claims
  // whatever it claims, e.g. its rank), anything else is the reason to reject it.
  std::function<std::string(const Hello&)> admit;
  // Outside the lock, after the handshake: read what the peer sends next. Throwing rejects.
  std::function<void(const Hello&, int fd)> prepare;
  // Under the lock: keep the connection.
  std::function<void(const Hello&, Fd fd)> commit;
  // Under the lock: undo admit's claim after prepare threw.
  std::function<void(const Hello&)> release;
  // Under the lock: true once every expected peer is in.
  std::function<bool()> done;
  // Under the lock, once done(): the reason given to a peer that comes after that.
  std::function<std::string(const Hello&)> full;
};

struct AcceptStats {
  int rejected = 0;
  std::string last;                       // "address: reason" of the last rejection
  rr_result_t lastCode = RR_ERR_TIMEOUT;  // and its code (RR_ERR_AUTH only for a failed proof)
};

// For a transport's admit: the reason two neighbours cannot link when the peer's hello
// says it uses another transport (kData is tcp, kUcx is ucx), else "".
std::string transportMismatch(const Hello& peer, LinkRole mine, int myRank);
// After acceptConcurrently, for a peer that did not come: RR_ERR_AUTH when the last
// rejection was a failed proof of the secret, else RR_ERR_TIMEOUT; and the message's tail,
// "(N connections rejected, last: ADDRESS: REASON)".
rr_result_t missingPeerCode(const AcceptStats& stats);
std::string rejectionSummary(const AcceptStats& stats);

// The recursive doubling partners a transport accepts (hellos whose index is kPartnerLink),
// each once; used under the acceptor's lock, as the callbacks are.
class PartnerAdmission {
 public:
  PartnerAdmission(const std::vector<int>& accept, int size);
  // "" and the rank claimed, or why `h` is refused.
  std::string admit(const Hello& h);
  void release(int rank) { claimed_[rank] = false; }
  void commit(int rank, Fd fd) { fds_[rank] = std::move(fd); }
  bool complete() const { return fds_.size() == claimed_.size(); }
  // After acceptConcurrently: the partners' connections; throws naming the first missing.
  std::map<int, Fd> take(int myRank, const AcceptStats& stats, int connectTimeoutMs);

 private:
  std::map<int, bool> claimed_;
  std::map<int, Fd> fds_;
  int size_;
};

// Returns when done() or at the deadline (the caller checks which). Never leaves a thread
// behind: if accepting itself fails, the running handshakes are cut off and joined before
// the error is thrown.
AcceptStats acceptConcurrently(int listenFd, const JobIdentity& job, Deadline deadline,
                               const AcceptCallbacks& callbacks, spdlog::logger& log,
                               const std::string& portName);

}  // namespace rr
