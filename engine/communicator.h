// Communicator: one process's membership in a job. It owns the config, the logger, the two
// ring links, the epoll set and the staging, validates every call's arguments, and turns
// each collective into a RingSchedule that the ProgressEngine runs.
//
// Errors: invalid arguments are reported without touching the network and leave the
// communicator usable. Any failure after communication began poisons it: the first error
// is kept, sent to both neighbours as an abort frame, and returned by every later call.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "engine/config.h"
#include "engine/ring_schedule.h"
#include "ringreduce/ringreduce.h"

namespace spdlog {
class logger;
}

namespace rr {

class Error;
class Link;
class ProgressEngine;
struct RingSockets;

class Communicator {
 public:
  static std::unique_ptr<Communicator> create(const rr_config_t* overrides);
  ~Communicator();

  int rank() const { return config_.rank; }
  int size() const { return config_.size; }

  void allreduce(const void* send, void* recv, size_t count, rr_dtype_t dtype, rr_op_t op);
  void broadcast(void* buf, size_t count, rr_dtype_t dtype, int root);
  void allgather(const void* send, void* recv, size_t countPerRank, rr_dtype_t dtype);
  void reduceScatter(const void* send, void* recv, size_t countPerRank, rr_dtype_t dtype,
                     rr_op_t op);
  void barrier();

 private:
  Communicator(Config config, std::shared_ptr<spdlog::logger> log);
  void connect();
  void execute(Collective kind, const void* send, void* recv, size_t count, rr_dtype_t dtype,
               rr_op_t op, int root);
  void runLocal(Collective kind, const void* send, void* recv, size_t count, rr_dtype_t dtype);
  void poison(const Error& error, uint64_t seq);

  Config config_;
  std::shared_ptr<spdlog::logger> log_;
  int epollFd_ = -1;
  std::unique_ptr<RingSockets> bootstrap_;
  std::unique_ptr<Link> left_;
  std::unique_ptr<Link> right_;
  std::unique_ptr<ProgressEngine> engine_;
  uint64_t seq_ = 0;
  std::optional<std::pair<rr_result_t, std::string>> error_;  // sticky
  std::unique_ptr<uint8_t[]> barrierBuf_;
};

// Validation shared by the C API and the communicator: throws RR_ERR_INVALID_ARGUMENT.
void checkDtypeOp(int dtype, int op, bool needOp);

}  // namespace rr
