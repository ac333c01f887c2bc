// transportsReport; see build_info.h.
#include "engine/build_info.h"

#include <exception>

#ifdef RR_HAVE_UCX
#include <ucp/api/ucp.h>

#include "transport/ucx/ucx_transport.h"
#endif

namespace rr {

std::string transportsReport() {
#ifdef RR_HAVE_UCX
  // What UCX sees here (UCX_TLS and UCX_NET_DEVICES apply); RR_TRANSPORT=ucx uses it.
  std::string ucx;
  try {
    ucx = UcxTransport::describeResources();
  } catch (const std::exception& e) {
    ucx = std::string("unusable: ") + e.what();
  }
  return std::string("tcp, ucx (UCX ") + ucp_get_version_string() + ": " + ucx +
         "); RR_TRANSPORT=auto takes ucx over shared memory where every rank shares one host, tcp otherwise";
#else
  return "tcp (built without UCX)";
#endif
}

}  // namespace rr
