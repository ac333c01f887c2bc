// The rendezvous on Asio; see rendezvous.h.
#include "engine/setup/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <memory>
#include <optional>

#include "transport/handshake.h"
#include "transport/interfaces.h"
#include "base/wire.h"

namespace rr {
namespace {

using asio::ip::tcp;

constexpr auto kHandshakeTime = std::chrono::seconds(5);  // per connection, endpoint included
// Connections still in their handshake when the job forms (a rank started twice, a late
// one, a hostile client) get this long to finish it and hear why they are turned away, as
// latecomers to a failed job do; those that have not by then are sent the reason unasked
// (Session::tooLate). Rank 0's init waits for it only while such a connection is open: a
// hostile client holds it up by at most this much.
constexpr auto kDoneGrace = std::chrono::seconds(1);
constexpr auto kFatalLinger = std::chrono::seconds(1);  // latecomers hear the reason

class Session;

class Server {
 public:
  Server(const Config& c, int listenFd, std::vector<Arrival>& table, Deadline deadline,
         spdlog::logger& log)
      : c_(c),
        job_{c.jobId, c.secret},
        table_(table),
        log_(log),
        acceptor_(io_),
        deadline_(io_),
        wind_(io_),
        retry_(io_),
        conns_(static_cast<size_t>(c.size)),
        claimed_(static_cast<size_t>(c.size), false) {
    const int fd = ::dup(listenFd);  // the acceptor owns its copy; the caller keeps its own
    if (fd < 0) failErrno(errno, "dup of the rendezvous listener");
    const bool v6 = localAddr(listenFd).storage.ss_family == AF_INET6;
    std::error_code ec;
    acceptor_.assign(v6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      fail(RR_ERR_SYSTEM, "rendezvous: cannot use the listener: {}", ec.message());
    }
    deadline_.expires_at(deadline);  // both are std::chrono::steady_clock
    deadline_.async_wait([this](std::error_code e) {
      if (!e) io_.stop();
    });
  }

  std::vector<Fd> run() {
    accept();
    io_.run();
    return std::move(conns_);
  }

  asio::io_context& io() { return io_; }
  const JobIdentity& job() const { return job_; }
  int joined() const { return joined_; }
  const std::optional<Error>& fatal() const { return fatal_; }
  int rejected() const { return rejected_; }
  const std::string& lastRejection() const { return last_; }
  rr_result_t lastCode() const { return lastCode_; }

  // The reason to turn this hello away, or "" (and the rank is claimed).
  std::string admit(const Hello& h) {
    if (fatal_) return fatal_->what();
    if (h.role != LinkRole::kBootstrap) return "a data connection sent to the rendezvous port";
    if (h.size != c_.size)
      return fmt::format("rank {} has size {}, rank 0 has size {}", h.rank, h.size, c_.size);
    if (h.rank < 1 || h.rank >= c_.size)
      return fmt::format("rank {} is out of range 1..{}", h.rank, c_.size - 1);
    if (done_)  // the more useful reasons come first
      return fmt::format("all {} ranks have already joined; rank {} came too late (started twice?)",
                         c_.size, h.rank);
    if (claimed_[static_cast<size_t>(h.rank)]) return fmt::format("rank {} joined twice", h.rank);
    claimed_[static_cast<size_t>(h.rank)] = true;
    return "";
  }
  void release(const Hello& h) { claimed_[static_cast<size_t>(h.rank)] = false; }

  void commit(const Hello& h, Fd fd, Arrival e) {
    conns_[static_cast<size_t>(h.rank)] = std::move(fd);
    table_[static_cast<size_t>(h.rank)] = std::move(e);
    if (++joined_ == c_.size - 1) windDown(kDoneGrace, true);
  }

  void joinFailed(const JoinFailed& e) {
    if (fatal_) return;
    fatal_ = e;
    windDown(kFatalLinger, false);
  }

  void rejected(const std::string& peer, const std::string& why, rr_result_t code) {
    ++rejected_;
    last_ = peer + ": " + why;
    lastCode_ = code;
    log_.warn("rendezvous: rejected connection from {}: {}", peer, why);
  }

  void sessionStarted(std::weak_ptr<Session> s) {
    ++sessions_;
    if (open_.size() >= 2 * static_cast<size_t>(sessions_) + 64)  // a flood: forget the ended
      std::erase_if(open_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
    open_.push_back(std::move(s));
  }
  void sessionEnded() {
    if (--sessions_ == 0 && done_) io_.stop();
  }

 private:
  void accept();
  void takeQueued();
  void answerTheRest();

  // Stops accepting (done: every rank joined) or keeps answering (fatal) for `grace`,
  // then stops.
  void windDown(std::chrono::milliseconds grace, bool done) {
    done_ = done_ || done;
    if (done) {
      takeQueued();
      // The port stops listening now, not when the caller closes its copy after the
      // verdicts: a rank that connects from here on is refused at once, rather than
      // queued by the kernel and then reset.
      ::shutdown(acceptor_.native_handle(), SHUT_RD);
      std::error_code ignored;
      acceptor_.close(ignored);
      if (sessions_ == 0) {
        io_.stop();
        return;
      }
    }
    wind_.expires_after(grace);
    wind_.async_wait([this](std::error_code e) {
      if (e) return;
      answerTheRest();
      io_.stop();
    });
  }

  const Config& c_;
  JobIdentity job_;
  std::vector<Arrival>& table_;
  spdlog::logger& log_;
  asio::io_context io_;  // first: destroyed last, after everything that uses it
  tcp::acceptor acceptor_;
  asio::steady_timer deadline_;
  asio::steady_timer wind_;
  asio::steady_timer retry_;
  std::vector<Fd> conns_;
  std::vector<bool> claimed_;
  int joined_ = 0;  // ranks other than 0
  bool done_ = false;
  int sessions_ = 0;
  std::vector<std::weak_ptr<Session>> open_;  // every session started; those alive are open
  std::optional<Error> fatal_;
  int rejected_ = 0;
  std::string last_;
  rr_result_t lastCode_ = RR_ERR_TIMEOUT;
};

// Why a read or write on a client failed, in the words the logs use everywhere.
std::string lost(const std::error_code& e) {
  return e == asio::error::eof ? std::string("connection closed by client") : "connection lost: " + e.message();
}

// One connection: challenge, hello, reply, endpoint, each asynchronous, under one timer.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), timer_(server.io()), hs_(server.job()) {
    peer_ = peerAddr(socket_.native_handle()).str();
  }

  void start() {
    server_.sessionStarted(weak_from_this());
    auto self = shared_from_this();
    timer_.expires_after(kHandshakeTime);
    timer_.async_wait([self](std::error_code e) {
      if (!e) self->fail("timed out waiting for client (5 s for the handshake and its endpoint)", RR_ERR_TIMEOUT);
    });
    asio::async_write(socket_, asio::buffer(hs_.challenge(), ServerHandshake::kChallengeBytes),
                      [self](std::error_code e, size_t) {
                        if (e) return self->fail(lost(e), RR_ERR_PEER_LOST);
                        self->readHello();
                      });
  }

  // The rendezvous is over (the job formed, or cannot) while this connection is still in
  // its handshake (its process slow to answer the challenge, on a loaded machine): it is
  // told why in the reply it waits for, not left to find its connection closed. The reply
  // goes out without its hello, which the client sends before it reads the reply anyway.
  void tooLate(const std::string& why) {
    if (ended_) return;
    if (out_.empty()) {
      const int fd = socket_.native_handle();
      char drop[256];  // unread input would turn the close into a reset that loses the reply
      while (::recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0) {
      }
      const std::string reply = hs_.reply(RR_ERR_INVALID_ARGUMENT, why);
      if (::send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) ::shutdown(fd, SHUT_WR);
    }
    fail(why, RR_ERR_INVALID_ARGUMENT);
  }

 private:
  void readHello() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(hello_), [self](std::error_code e, size_t) {
      if (e) return self->fail(lost(e) + " in the handshake", RR_ERR_PEER_LOST);
      self->onHello();
    });
  }

  void onHello() {
    try {
      hello_ok_ = hs_.check(hello_);
    } catch (const Error& e) {
      return refuse(hs_.rejection(), e.what(), e.code());
    }
    const std::string why = server_.admit(hello_ok_);
    if (!why.empty()) return refuse(hs_.reply(RR_ERR_INVALID_ARGUMENT, why), why, RR_ERR_INVALID_ARGUMENT);
    claimed_ = true;
    out_ = hs_.reply(RR_SUCCESS, "");
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_), [self](std::error_code e, size_t) {
      if (e) return self->fail(lost(e), RR_ERR_PEER_LOST);
      self->readEndpoint();
    });
  }

  void readEndpoint() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(head_, 3), [self](std::error_code e, size_t) {
      if (e) return self->fail(lost(e) + " before its endpoint", RR_ERR_PEER_LOST);
      const size_t len = self->head_[2];
      if (len == 0) return self->readJoinError();
      if (len > kMaxEndpointIp)
        return self->fail(fmt::format("protocol error: an address of {} bytes", len), RR_ERR_SYSTEM);
      self->text_.assign(len + kArrivalTail, '\0');  // the IP, then the arrival's tail
      asio::async_read(self->socket_, asio::buffer(self->text_), [self](std::error_code e2, size_t) {
        if (e2) return self->fail(lost(e2) + " in its endpoint", RR_ERR_PEER_LOST);
        self->onEndpoint();
      });
    });
  }

  void onEndpoint() {
    const size_t ipLength = text_.size() - kArrivalTail;
    Arrival e;
    e.endpoint = Endpoint{text_.substr(0, ipLength), wire::get16(head_)};
    try {
      makeAddr(e.endpoint.ip, e.endpoint.port);  // a numeric address, or the rank is turned away
      decodeArrivalTail(reinterpret_cast<const uint8_t*>(text_.data()) + ipLength, e,
                        fmt::format("rank {}", hello_ok_.rank));
    } catch (const Error& err) {
      return fail(err.what(), err.code());
    }
    timer_.cancel();
    claimed_ = false;  // committed
    const int fd = socket_.release();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    server_.commit(hello_ok_, Fd(fd), std::move(e));
    end();
  }

  void readJoinError() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(head_, 8), [self](std::error_code e, size_t) {
      if (e) return self->fail(lost(e), RR_ERR_PEER_LOST);
      size_t len = 0;
      try {
        len = statusLength(self->head_, fmt::format("rank {}", self->hello_ok_.rank));
      } catch (const Error& err) {
        return self->fail(err.what(), err.code());
      }
      self->text_.assign(len, '\0');
      asio::async_read(self->socket_, asio::buffer(self->text_), [self](std::error_code e2, size_t) {
        if (e2) return self->fail(lost(e2), RR_ERR_PEER_LOST);
        const Error why = decodeStatus(self->head_, self->text_);
        const JoinFailed failed(why.code(), fmt::format("rank {} cannot join: {}", self->hello_ok_.rank, why.what()));
        self->fail(failed.what(), failed.code());
        self->server_.joinFailed(failed);
      });
    });
  }

  // Sends the reply that says why (if there is one), then closes.
  void refuse(const std::string& reply, const std::string& why, rr_result_t code) {
    if (reply.empty()) return fail(why, code);
    out_ = reply;
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_), [self, why, code](std::error_code, size_t) {
      self->fail(why, code);
    });
  }

  void fail(const std::string& why, rr_result_t code) {
    if (ended_) return;
    if (claimed_) server_.release(hello_ok_);
    claimed_ = false;
    server_.rejected(peer_, why, code);
    std::error_code ignored;
    socket_.close(ignored);
    end();
  }

  void end() {
    if (ended_) return;
    ended_ = true;
    timer_.cancel();
    server_.sessionEnded();
  }

  Server& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  ServerHandshake hs_;
  std::string peer_;
  uint8_t hello_[ServerHandshake::kHelloBytes] = {};
  Hello hello_ok_;
  bool claimed_ = false;
  bool ended_ = false;
  std::string out_;  // the reply once one is queued (never empty then): the client hears one
  uint8_t head_[8] = {};
  std::string text_;
};

void Server::accept() {
  acceptor_.async_accept([this](std::error_code e, tcp::socket socket) {
    if (e == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (e) {  // out of fds under a flood, say: try again shortly
      log_.warn("rendezvous: accept failed: {}; retrying", e.message());
      retry_.expires_after(std::chrono::milliseconds(20));
      retry_.async_wait([this](std::error_code t) {
        if (!t) accept();
      });
      return;
    }
    std::make_shared<Session>(*this, std::move(socket))->start();
    accept();
  });
}

// When every rank has joined: connections the kernel already completed (a rank started
// twice, a late one) are taken and answered ("all N ranks have already joined") instead of
// being reset when the port closes. At most 64: a flood cannot keep rank 0 here.
void Server::takeQueued() {
  const auto protocol = acceptor_.local_endpoint().protocol();
  const int listenFd = acceptor_.native_handle();
  ::fcntl(listenFd, F_SETFL, ::fcntl(listenFd, F_GETFL) | O_NONBLOCK);  // never wait here
  for (int i = 0; i < 64; ++i) {
    const int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    tcp::socket socket(io_);
    std::error_code e;
    socket.assign(protocol, fd, e);
    if (e) {
      ::close(fd);
      continue;
    }
    std::make_shared<Session>(*this, std::move(socket))->start();
  }
}

// When the wind-down ends: every connection still open is told why it is turned away.
void Server::answerTheRest() {
  const std::string why =
      fatal_ ? std::string(fatal_->what())
             : fmt::format("all {} ranks have already joined; this connection's handshake did not finish "
                           "within {} ms of that (a rank started twice, or a late one?)",
                           c_.size, std::chrono::duration_cast<std::chrono::milliseconds>(kDoneGrace).count());
  for (auto& weak : open_)
    if (auto s = weak.lock()) s->tooLate(why);
  open_.clear();
}

}  // namespace

void reserveFds(int needed, spdlog::logger& log) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= static_cast<rlim_t>(needed)) return;
  const rlim_t want = std::min<rlim_t>(lim.rlim_max, static_cast<rlim_t>(needed));
  const rlim_t before = lim.rlim_cur;
  lim.rlim_cur = want;
  if (::setrlimit(RLIMIT_NOFILE, &lim) == 0)
    log.info("raised the open-file limit from {} to {} for {} bootstrap connections", before, want, needed);
  if (want < static_cast<rlim_t>(needed))
    log.warn("the open-file limit (hard {}) is below the {} this rank needs; raise it (ulimit -n)",
             lim.rlim_max, needed);
}

std::vector<Fd> gatherRanks(const Config& c, int listenFd, std::vector<Arrival>& table,
                            Deadline deadline, spdlog::logger& log) {
  Server server(c, listenFd, table, deadline, log);
  std::vector<Fd> conns = server.run();
  std::optional<Error> failure = server.fatal();
  if (!failure && server.joined() < c.size - 1) {
    std::string missing;
    int count = 0;
    for (int r = 1; r < c.size; ++r) {
      if (conns[static_cast<size_t>(r)]) continue;
      if (count < 20) missing += (count ? ", " : "") + std::to_string(r);
      ++count;
    }
    if (count > 20) missing += fmt::format(" and {} more", count - 20);
    // A host's name that resolves to loopback here (Debian's /etc/hosts gives it 127.0.1.1)
    // leaves rank 0 listening where no other host can reach it.
    std::string where;
    if (const std::string ip = localAddr(listenFd).ip(); isLoopbackAddress(ip)) {
      const std::string host = splitHostPort(c.addr, "RR_ADDR").first;  // checked at config
      in6_addr any{};
      const bool numeric = ::inet_pton(AF_INET, host.c_str(), &any) == 1 || ::inet_pton(AF_INET6, host.c_str(), &any) == 1;
      where = numeric ? fmt::format("; rank 0 listens on {}, a loopback address: ranks on other hosts cannot reach it", ip)
                      : fmt::format("; rank 0 listens on {}, a loopback address, which RR_ADDR's host '{}' resolves to "
                                    "here: ranks on other hosts cannot reach it (give RR_ADDR an address they reach)",
                                    ip, host);
    }
    // RR_ERR_AUTH only when what kept them out was a failed proof of the secret.
    failure = Error(server.rejected() > 0 && server.lastCode() == RR_ERR_AUTH ? RR_ERR_AUTH : RR_ERR_TIMEOUT,
                    fmt::format("rendezvous at {}: {} {} did not join within {} ms ({} connection{} "
                                "rejected{}{}){}",
                                c.addr, count == 1 ? "rank" : "ranks", missing, c.connectTimeoutMs,
                                server.rejected(), server.rejected() == 1 ? "" : "s",
                                server.rejected() ? ", last: " : "", server.lastRejection(), where));
  }
  if (failure) {  // every rank that joined hears why the job cannot form
    for (int r = 1; r < c.size; ++r) {
      Fd& fd = conns[static_cast<size_t>(r)];
      if (!fd) continue;
      const std::string m = encodeJobFailed(*failure);
      try {
        sendAll(fd.get(), m.data(), m.size(), deadlineIn(500), fmt::format("rank {}", r));
      } catch (const Error&) {  // best effort: that rank may be gone
      }
    }
    throw *failure;
  }
  return conns;
}

}  // namespace rr
