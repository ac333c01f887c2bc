// `ringreduce info`; see info.h.
#include "cli/info.h"

#include <cstdio>
#include <string>

#include "kernels/reduce.h"
#ifdef RR_HAVE_UCX
#include <ucp/api/ucp.h>

#include "transport/ucx/ucx_transport.h"
#endif
#include "ringreduce/ringreduce.h"

namespace rr::cli {

std::string cudaReport();  // cuda_probe.cc or cuda_probe_none.cc

int runInfo() {
  const int v = rr_version();
  std::printf("ringreduce %d.%d.%d (header %d.%d.%d)\n", v / 10000, v / 100 % 100, v % 100,
              RR_VERSION_MAJOR, RR_VERSION_MINOR, RR_VERSION_PATCH);
  std::printf("build: %s, compiler %s, CUDA %s\n", RR_BUILD_TYPE, __VERSION__, RR_BUILD_CUDA);
#ifdef RR_HAVE_UCX
  // What UCX sees here (UCX_TLS and UCX_NET_DEVICES apply); RR_TRANSPORT=ucx uses it.
  std::string ucx;
  try {
    ucx = rr::UcxTransport::describeResources();
  } catch (const std::exception& e) {
    ucx = std::string("unusable: ") + e.what();
  }
  std::printf("transports: tcp, ucx (UCX %s: %s); RR_TRANSPORT=auto takes ucx over shared memory where "
              "every rank shares one host, tcp otherwise\n",
              ucp_get_version_string(), ucx.c_str());
#else
  std::printf("transports: tcp (built without UCX)\n");
#endif
  std::printf("host reducer: %s (supported:", isaName(bestIsa()));
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (isaSupported(isa)) std::printf(" %s", isaName(isa));
  std::printf(")\n");
  std::printf("cuda: %s\n", cudaReport().c_str());
  return 0;
}

}  // namespace rr::cli
