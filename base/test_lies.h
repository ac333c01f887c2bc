// Test-only lies: a rank that sends malformed but authenticated messages, so that tests can
// show that every honest rank fails named and writes nothing outside its buffers
// (docs/reliability.md, "A lying peer"). RR_TEST_LIE=NAME[,NAME...] names the lies,
// RR_TEST_LIE_RANK=R the one rank that tells them (every rank when unset; compared with
// RR_RANK). Compiled in only with -Dtest_lies (on except in release builds); elsewhere
// lying() is false and costs nothing.
#pragma once

#include <string_view>

namespace rr {

#ifdef RR_TEST_LIES
bool lying(std::string_view name);
#else
inline bool lying(std::string_view) { return false; }
#endif

// The origin an abort frame names: `origin`, or a rank no job has (abort-origin-max) or
// -1 (abort-origin-minus) under those lies.
inline int lyingOrigin(int origin) {
  if (lying("abort-origin-max")) return 2147483647;
  if (lying("abort-origin-minus")) return -1;
  return origin;
}

}  // namespace rr
