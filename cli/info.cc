// `ringreduce info`; see info.h.
#include "cli/info.h"

#include <cstdio>
#include <string>

#include "engine/build_info.h"
#include "engine/setup/config.h"
#include "kernels/reduce.h"
#include "ringreduce/ringreduce.h"

namespace rr::cli {

std::string cudaReport();  // cuda_probe.cc or cuda_probe_none.cc

int runInfo() {
  const int v = rr_version();
  std::printf("ringreduce %d.%d.%d (header %d.%d.%d)\n", v / 10000, v / 100 % 100, v % 100,
              RR_VERSION_MAJOR, RR_VERSION_MINOR, RR_VERSION_PATCH);
  std::printf("build: %s, compiler %s, CUDA %s\n", RR_BUILD_TYPE, __VERSION__, RR_BUILD_CUDA);
  std::printf("transports: %s\n", rr::transportsReport().c_str());
  std::printf("host reducer: %s (supported:", isaName(bestIsa()));
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (isaSupported(isa)) std::printf(" %s", isaName(isa));
  std::printf(")\n");
  std::printf("cuda: %s\n", cudaReport().c_str());
  return 0;
}

int printSettings(bool testHooks) {
  std::fputs(rr::settingsMarkdown(testHooks).c_str(), stdout);
  return 0;
}

}  // namespace rr::cli
