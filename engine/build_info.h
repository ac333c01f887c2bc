// What this build and this host offer, for `ringreduce info` (the CLI names no transport
// of its own).
#pragma once

#include <string>

namespace rr {

// "tcp, ucx (UCX 1.13.1: transports ...); RR_TRANSPORT=auto takes ..." or "tcp (built
// without UCX)".
std::string transportsReport();

}  // namespace rr
