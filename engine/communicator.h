// Communicator: one process's membership in a job. It owns the config, the logger, the two
// ring links, the staging, the queue of submitted collectives and the progress thread that
// runs them in submission order.
//
//   caller threads --submit--> OpQueue --progress thread--> [fuse] -> ProgressEngine -> links
//                  <--Request completes-----------------------------------------------'
//   a blocking call, progress thread idle:  submit quietly, then the same turn on the
//                                           caller's thread (runBlocking), engine lock held
//
// Whichever thread drives the engine and the links holds engineMutex_, so one does at a
// time, in submission order either way.
//
// communicator.cc: creation and submission (any thread); device_submit.cc: the device half
// of a submission; progress_thread.cc: the progress thread; abort_propagation.cc: the
// sticky first error, rr_comm_abort and the abort frames to the peers.
//
// Errors: invalid arguments are reported at submission without touching the network and
// leave the communicator usable. Any failure after communication began poisons it: the
// first error is kept, sent to both neighbours as an abort frame, given to every queued
// collective, and returned by every later call.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/plan/algorithm.h"
#include "engine/setup/config.h"
#include "engine/run/op_header.h"
#include "engine/run/op_queue.h"
#include "engine/run/request.h"
#include "engine/observe/stall_monitor.h"
#include "transport/socket.h"
#include "ringreduce/ringreduce.h"

namespace spdlog {
class logger;
}

namespace rr {

class Agreement;
class Device;
class Error;
class EventSet;
class FusionBuffer;
class Link;
class PhaseStats;
class ProgressEngine;
class StreamOrder;
class Timeline;
class Transport;
class Waker;

class Communicator {
 public:
  static std::unique_ptr<Communicator> create(const rr_config_t* overrides);
  // Cancels the collectives not yet finished (RR_ERR_ABORTED, as abort(); their peers are
  // told), then stops the progress thread.
  ~Communicator();

  int rank() const { return config_.rank; }
  int size() const { return config_.size; }

  // Validates and queues a collective; throws Error for bad arguments or a poisoned
  // communicator. For broadcast send == recv == the buffer. Buffers are host memory or both
  // memory of one GPU (the communicator's, bound by its first device bucket). With a stream
  // (and always for device buffers, NULL meaning CUDA's legacy default stream) the pass
  // starts after the work queued there so far, and work queued there later waits for it.
  std::shared_ptr<Request> submit(Collective kind, const void* send, void* recv, size_t count,
                                  rr_dtype_t dtype, rr_op_t op, int root, void* stream = nullptr,
                                  bool quiet = false);
  std::shared_ptr<Request> submitBarrier(bool quiet = false);

  // A blocking call: `submitOne(quiet)` submits the collective (submit(..., quiet)). When
  // this thread can take the engine (the progress thread is between collectives), nothing
  // is queued ahead and the bucket is host memory without a stream, the pass runs here, as
  // the progress thread would run it (RR_INLINE_BLOCKING=1, the default): no hand-off to
  // the progress thread and back. Otherwise the progress thread runs it. Returns the
  // request, which the caller then waits for (at once, when it ran here).
  template <class SubmitOne>
  std::shared_ptr<Request> runBlocking(SubmitOne&& submitOne) {
    if (!config_.inlineBlocking) return submitOne(false);
    // Submitted before the engine is taken: a device bucket's submission may wait for room
    // in the GPU's queue, which the progress thread makes, and it needs the engine for that.
    std::shared_ptr<Request> request = submitOne(true);
    std::unique_lock<std::mutex> engine(engineMutex_, std::try_to_lock);
    if (!engine.owns_lock()) {
      queue_.announce();
      return request;
    }
    runHere(request);
    return request;
  }

  // From any thread: fail everything queued or running with RR_ERR_ABORTED within 100 ms.
  void abort();
  void abort(const std::string& reason);
  rr_result_t asyncError();

 private:
  Communicator(Config config, std::shared_ptr<spdlog::logger> log);
  void connect();
  void progressLoop();
  // With engineMutex_ held: one collective (or fused group) from the front, its errors
  // handled as the progress thread handles them (poison, finish what was in flight).
  void turn(const std::shared_ptr<Request>& front);
  // With engineMutex_ held, after a quiet push of `request` (runBlocking): runs it if it is
  // the front and may run on this thread, else lets the progress thread see it.
  void runHere(const std::shared_ptr<Request>& request);
  // With engineMutex_ held: tells the neighbours of an rr_comm_abort, once.
  void sendAbortOnce();
  void runNext(const std::shared_ptr<Request>& front);
  // `leftHeader`: the left neighbour's header when already received (ProgressEngine::run).
  void runPass(const std::vector<std::shared_ptr<Request>>& ops, const GroupHeader& header,
               const GroupHeader* leftHeader, Clock::time_point waitStart);
  void runLocal(const Request& r, Device* device);
  // submit's parts: the buffers' sizes and overlap checked (sendBytes, recvBytes); and, in
  // device_submit.cc, the GPU both buffers are on (-1: host memory), the GPU opened for an
  // ordered submission, and the request ordered on `stream` with its device work queued
  // (push queues it, under submitMutex_).
  std::pair<size_t, size_t> checkBuffers(Collective kind, const void* send, void* recv, size_t count, size_t es,
                                         int root, const char* name) const;
  int bufferDevice(const void* send, const void* recv, size_t count, const char* name) const;
  void openDeviceFor(void* stream, int device, const char* name);
  void orderOnStream(Request& request, void* stream, const std::function<void()>& push, const char* name);
  // Before a request's pass: makes its GPU current and orders the pass after the caller's
  // stream (StreamOrder::start). Returns the device for a device bucket, else nullptr.
  Device* prepare(Request& r);
  // Opens the GPU, its pinned staging and the StreamOrder on the first submission that
  // needs them (a device bucket, or a stream), before any stream is held: CUDA allocations
  // synchronise the device and would wait for held streams. Later ones must name the same GPU.
  void openDevice(int ordinal, const char* name);
  // Waits until the device signalled the end of r's device work (runLocal's copy).
  void waitDevice(Device& device, const Request& r);
  // The schedule of a pass (both the progress thread and, for a device bucket, the
  // submission that queues its device work make it): planPass with this job's facts.
  ScheduleParams scheduleFor(Collective kind, rr_dtype_t dtype, size_t count, int root, bool device) const {
    return planPass(facts_, kind, dtype, count, root, device);
  }
  // With submitMutex_ held: queues a device bucket's work on its GPU (StreamOrder::order).
  void queueDeviceWorkFor(const Request& r);
  void onIdle();
  // Completes a request (Request::complete) and counts it as finished.
  void finish(Request& r, rr_result_t code, std::string message);
  StallState stallState() const;  // the engine's, with the current op's kind and bytes
  void poison(const Error& error, uint64_t seq);
  std::optional<std::pair<rr_result_t, std::string>> stickyError();

  Config config_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<EventSet> events_;  // what the progress thread sleeps on
  std::unique_ptr<Transport> transport_;
  std::vector<Fd> bootstrap_;         // the rendezvous connections (stall monitor)
  JobFacts facts_;                    // what every rank knows alike, for planning passes
  std::unique_ptr<Link> left_;
  std::unique_ptr<Link> right_;
  std::vector<std::unique_ptr<Link>> partners_;  // recursive doubling's (n > 2)
  // Every link there is: the ring's two, then the partners'.
  std::vector<Link*> links() const {
    std::vector<Link*> out;
    for (Link* l : {left_.get(), right_.get()})
      if (l) out.push_back(l);
    for (const auto& p : partners_) out.push_back(p.get());
    return out;
  }
  std::mutex deviceMutex_;
  std::unique_ptr<Device> device_;  // opened by the first submission that needs it
  // Held by a submission from its device work to its place in the queue: the order of the
  // device's work is the queue's. programEnd_: the flag value ending the last work queued.
  std::mutex submitMutex_;
  uint32_t programEnd_ = 0;
  std::unique_ptr<StreamOrder> streamOrder_;
  std::unique_ptr<Agreement> agreement_;  // the exchange that guards every pass (agreement.h)
  std::unique_ptr<ProgressEngine> engine_;
  std::unique_ptr<StallMonitor> monitor_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<PhaseStats> phases_;  // RR_PHASES=1
  std::unique_ptr<FusionBuffer> fusion_;
  std::unique_ptr<uint8_t[]> barrierBuf_;
  OpQueue queue_;
  std::thread thread_;
  // Held by whichever thread drives the engine and the links: the progress thread, or a
  // caller running its blocking collective (runBlocking). What follows is theirs under it.
  std::mutex engineMutex_;
  bool abortSent_ = false;
  std::vector<std::shared_ptr<Request>> inFlight_;  // taken from the queue, not yet completed
  std::atomic<uint64_t> finished_{0};               // the last completed collective's number

  // The collective the progress thread works on, for the stall monitor.
  OpDesc current_{};
  size_t currentBytes_ = 0;

  std::atomic<bool> aborted_{false};
  std::unique_ptr<Waker> waker_;

  std::mutex errorMutex_;
  std::optional<std::pair<rr_result_t, std::string>> error_;  // sticky
};

// Validation shared by the C API and the communicator: throws RR_ERR_INVALID_ARGUMENT.
void checkDtypeOp(int dtype, int op, bool needOp);

}  // namespace rr
