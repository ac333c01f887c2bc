// What one of UCX's print functions (ucp_context_print_info, ucp_ep_print_info) writes, as
// a string: the worker reads its transports from it, a link its lanes.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace rr {

// "" if it cannot be captured.
template <class Print>
std::string printed(Print print) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  if (f == nullptr) return "";
  print(f);
  std::fclose(f);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

}  // namespace rr
