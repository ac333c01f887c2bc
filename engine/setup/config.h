// Config: every setting of a communicator, declared here once, read once at init from the
// rr_config_t (which wins) or the environment, validated, and logged once at INFO.
//
//   RR_RANK, RR_SIZE        this rank and the number of ranks; else the launcher's variables:
//                           OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE,
//                           SLURM_PROCID/SLURM_NTASKS, RANK/WORLD_SIZE (torchrun)
//   RR_ADDR                 rendezvous host:port where rank 0 listens; else
//                           MASTER_ADDR:MASTER_PORT (torchrun)
//   RR_SECRET               job secret for the HMAC handshake (empty: a warning)
//   RR_JOB_ID               job id checked in every handshake (default: hash of RR_ADDR)
//   RR_TIMEOUT_MS           no-progress deadline of a collective (300000)
//   RR_CONNECT_TIMEOUT_MS   deadline of rendezvous and ring connection, retries included
//                           (default: RR_TIMEOUT_MS)
//   RR_SOCKET_IFNAME        interface selection, NCCL syntax (default: the route to rank 0)
//   RR_TRANSPORT            tcp, ucx (when built with UCX; UCX_* variables pass through to
//                           UCX untouched) or auto (default; tcp for now)
//   RR_SOCKETS_PER_LINK     TCP sockets per ring link (default 2)
//   RR_SEGMENT_BYTES        pipelined segment size (default 1 MiB)
//   RR_FUSION_BYTES         all-reduces this small or smaller may share a ring pass, up to
//                           this many bytes in all; 0 turns fusion off (default 4 MiB)
//   RR_STALL_WARN_S         rank 0 names the ranks that have not submitted a collective that
//                           has waited this long (default 60)
//   RR_TIMELINE             write Chrome trace events to this path, one file per rank
//   RR_LOG_LEVEL            trace, debug, info, warn (default), error, off
//   RR_SPIN_US              how long a waiting thread (the caller in rr_wait, the progress
//                           thread between and inside collectives) looks before it sleeps;
//                           default 200, or 0 when this host's ranks (RR_LOCAL_SIZE,
//                           OMPI_COMM_WORLD_LOCAL_SIZE, LOCAL_WORLD_SIZE, MPI_LOCALNRANKS)
//                           outnumber the cores they share (RR_LOCAL_CPUS, else the cores
//                           this process may use)
//   RR_ALGO                 the all-reduce's algorithm: ring, rd (recursive doubling), hd
//                           (halving-doubling; the ring at n = 2, where they are the same
//                           exchanges) or auto (default: rd up to rdMaxBytes(size, span),
//                           hd up to hdMaxBytes(size, pulled frames), the ring above; the
//                           span and whether every link reads its peers' frames are found
//                           at init); must be the same on every rank
//   RR_INLINE_BLOCKING      1 (default): a blocking call on host memory with nothing queued
//                           ahead of it runs its pass on the calling thread while the
//                           progress thread is between collectives, saving two thread
//                           hand-offs; 0: the progress thread runs every pass
//   RR_PHASES=1             at destroy, print where each collective's time went (median per
//                           phase and bucket size; phase_stats.h) to stderr
//   RR_TEST_FAKE_DEVICE=1   tests only: every buffer counts as memory of a stand-in GPU in
//                           host memory (kernels/fake_gpu.h), to test the device path here;
//                           a stream is then a stand-in stream
//   RR_TEST_HOLD_STREAM=host-function   tests only, with RR_TEST_FAKE_DEVICE=1: hold the
//                           caller's stream with a blocking host function, the design that
//                           deadlocked on a real GPU, to show that the stand-in catches it
//   RR_TEST_KERNEL_LOADING=lazy   tests only, with RR_TEST_FAKE_DEVICE=1: the stand-in GPU
//                           loads its kernels at their first launch, not at open (the
//                           design that deadlocked on an H200), and gives up that load's
//                           implicit synchronisation after half of RR_TIMEOUT_MS
//   RR_TEST_GPU_QUEUE_DEPTH=N   tests only, with RR_TEST_FAKE_DEVICE=1: a stream of the
//                           stand-in GPU holds at most N items (its rule 9; default 1024)
//   RR_TEST_EXIT_IN_RING_SETUP=1   tests only: the rank exits (status 3) between the
//                           rendezvous and its ring connections; =after-report: once its
//                           ring formed and it told rank 0 so, before its links' traits
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
