// lying(); see test_lies.h.
#include "base/test_lies.h"

#ifdef RR_TEST_LIES
#include <cstdlib>
#include <string>

namespace rr {

bool lying(std::string_view name) {
  // Read once: a lie holds for the process's life.
  static const std::string lies = [] {
    const char* lie = std::getenv("RR_TEST_LIE");
    const char* liar = std::getenv("RR_TEST_LIE_RANK");
    const char* rank = std::getenv("RR_RANK");
    if (lie == nullptr) return std::string();
    if (liar != nullptr && (rank == nullptr || std::string(liar) != rank)) return std::string();
    return "," + std::string(lie) + ",";
  }();
  return !lies.empty() && lies.find("," + std::string(name) + ",") != std::string::npos;
}

}  // namespace rr
#endif
