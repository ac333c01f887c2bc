// Error: an exception that carries a result code and a message that names what failed,
// which rank and which values. Thrown inside the library, caught at the C boundary.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "ringreduce/ringreduce.h"

namespace rr {

class Error : public std::runtime_error {
 public:
  Error(rr_result_t code, const std::string& message)
      : std::runtime_error(message), code_(code), reason_(message) {}
  // An error that another rank reported in an abort frame: `origin` failed first, in its
  // collective number `seq`, saying `reason`.
  Error(rr_result_t code, const std::string& message, int origin, uint64_t seq, std::string reason)
      : std::runtime_error(message),
        code_(code),
        origin_(origin),
        seq_(seq),
        reason_(std::move(reason)) {}
  rr_result_t code() const { return code_; }
  int origin() const { return origin_; }  // -1: this rank
  uint64_t seq() const { return seq_; }   // the origin's collective number, if origin >= 0
  const std::string& reason() const { return reason_; }  // the origin's own words

 private:
  rr_result_t code_;
  int origin_ = -1;
  uint64_t seq_ = 0;
  std::string reason_;
};

template <class... Args>
[[noreturn]] void fail(rr_result_t code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Throws RR_ERR_SYSTEM with strerror(errnum) appended: "<what>: <strerror>".
[[noreturn]] void failErrno(int errnum, const std::string& what);

}  // namespace rr
