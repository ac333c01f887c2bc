// Config: every setting of a communicator, read once at init from the rr_config_t (which
// wins) or the environment, validated, and logged once at INFO. What each means is in one
// table, settingsTable(): `ringreduce info --settings` prints it, the README's settings
// table and docs/testing.md's test hooks are checked against it (test/settings_test.sh),
// and the reader takes no RR_ variable that is not in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace rr {

// A setting that shapes the wire or the plan of every pass, so it must be the same on every
// rank: each rank reports these at the rendezvous and rank 0 compares them (bootstrap.cc),
// so that ranks that differ fail init naming the setting, two ranks and their values.
enum class JobSettingId : uint8_t { kSegmentBytes = 1, kFusionBytes = 2, kAlgo = 3, kSocketsPerLink = 4 };
struct JobSetting {
  JobSettingId id;
  uint64_t value;
};
// "RR_ALGO=rd", "RR_FUSION_BYTES=65536"; an id this build does not know, by its number.
std::string jobSettingText(uint8_t id, uint64_t value);
// Whether a setting only matters over TCP (RR_SOCKETS_PER_LINK): compared where the job
// runs over TCP.
inline bool jobSettingTcpOnly(uint8_t id) { return id == static_cast<uint8_t>(JobSettingId::kSocketsPerLink); }

// One row of the settings table.
struct SettingDoc {
  const char* name;       // "RR_FUSION_BYTES"
  const char* meaning;
  const char* byDefault;
  const char* sameOnEveryRank;  // "no", or why and how it must be the same
  bool testOnly;          // a test hook, listed apart
};
// Every RR_ variable the library reads, the test hooks last.
const std::vector<SettingDoc>& settingsTable();
// The table as Markdown: the settings (testHooks false) or the test hooks.
std::string settingsMarkdown(bool testHooks);

struct Config {
  int rank = 0;
  int size = 1;
  std::string rankSource;  // where rank and size came from, for the log
  std::string addr;
  std::string secret;
  uint64_t jobId = 0;
  int timeoutMs = 300000;
  int connectTimeoutMs = 300000;
  std::string ifname;
  // tcp, ucx, or auto (rank 0 chooses at init: transport/auto_transport.h); tcp once loaded
  // in a build without UCX.
  std::string transport = "auto";
  int socketsPerLink = 2;
  size_t segmentBytes = 1 << 20;
  size_t fusionBytes = 4 << 20;
  double stallWarnS = 60;
  std::string timeline;
  std::string logLevel = "warn";
  std::string algo = "auto";  // RR_ALGO: auto, ring or rd
  bool phases = false;
  bool inlineBlocking = true;  // RR_INLINE_BLOCKING
  bool gpuFlagKernels = false;  // RR_GPU_FLAG_OPS=kernels: one-thread kernels wait and write the flags
  bool gpuProgram = false;      // RR_GPU_PROGRAM=1: one kernel per collective's device work
  int spinUs = 200;
  std::string spinSource = "default";  // why spinUs has its value, for the log
  bool fakeDevice = false;
  bool testHoldByHostFunction = false;  // RR_TEST_HOLD_STREAM=host-function (stand-in only)
  bool testLazyKernels = false;         // RR_TEST_KERNEL_LOADING=lazy (stand-in only)
  int testGpuQueueDepth = 0;            // RR_TEST_GPU_QUEUE_DEPTH (stand-in only; 0: its default)
  bool testExitInRingSetup = false;     // RR_TEST_EXIT_IN_RING_SETUP=1
  bool testExitAfterRingReport = false; // RR_TEST_EXIT_IN_RING_SETUP=after-report
  int testPauseAfterSendsMs = 0;        // RR_TEST_PAUSE_AFTER_SENDS_MS

  // Throws RR_ERR_INVALID_ARGUMENT naming the variable and its value.
  static Config load(const rr_config_t* overrides);
  // The job-wide settings (JobSettingId), as this rank reports them at the rendezvous.
  std::vector<JobSetting> jobSettings() const;
  std::string describe() const;  // one line for the INFO log
};

}  // namespace rr
