// `ringreduce info`: version, build options, the reducer the CPU selects, CUDA devices.
#pragma once

namespace rr::cli {
int runInfo();
}
