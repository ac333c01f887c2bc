// `ringreduce info`: version, build options, the reducer the CPU selects, CUDA devices.
#pragma once

namespace rr::cli {
int runInfo();
// `ringreduce info --settings` (or `--test-hooks`): the settings table, from the one reader.
int printSettings(bool testHooks);
}
