// The stand-in GPU: streams, events, kernels and host functions in host memory, for tests of
// the engine's device path and stream ordering on machines without a GPU
// (RR_TEST_FAKE_DEVICE=1). One per process, like a CUDA context on one device.
//
// A stand-in is worth only the rules of the real thing it keeps (docs/gpu.md, "The stand-in
// GPU"). These are CUDA's rules, each enforced here and each tested in test/test_fake_gpu.cc
// to fail where CUDA fails:
//
//   1. Work on one stream runs in the order it was queued, one item at a time; streams run
//      concurrently with each other (a thread per stream).
//   2. While a host function (cudaLaunchHostFunc) runs, no queued work on any stream of the
//      device starts (seen on Hopper: a blocking host function stalls every stream of the
//      process). A host function that waits for other device work therefore deadlocks.
//   3. An event wait (cudaStreamWaitEvent) waits for the record the event had when the wait
//      was queued, and holds only its own stream; so does a value wait (cuStreamWaitValue32:
//      until (int32_t)(*addr - value) >= 0).
//   4. The legacy default stream (stream NULL) is ordered with every blocking stream: work on
//      it starts after the work queued before it on blocking streams, and work on a blocking
//      stream starts after the work queued before it on stream NULL. Non-blocking streams
//      (cudaStreamNonBlocking, the library's own) are ordered with nothing.
//   5. A call that implicitly synchronises the device (cudaHostAlloc, cudaFreeHost, a
//      kernel's lazy load, ...) is a barrier across the device: it waits for the work queued
//      before it on every stream, and work queued on any stream after it does not start
//      until it is over. So a stream held on a value that only later work releases stops the
//      whole device (seen on an H200: a program's kernel launched for the first time while
//      an all-reduce held its stream stalled the library's kernels). Where CUDA would wait
//      forever, the stand-in gives up after `kSyncLimit` and throws, naming the busy stream.
//   6. Kernels finish late: a kernel starts no earlier than `kLatency` after it was queued,
//      so a result read before its completion was observed is stale.
//   7. A host function may not call CUDA.
//   8. Lazy loading (CUDA's default since 12.2): each kernel is loaded at its first launch in
//      the process, and the load synchronises the device implicitly (rule 5; CUDA says it
//      "may", the stand-in always does). So the first launch of a kernel while a stream is
//      held on a value that only later work releases never returns (seen on an H200: every
//      device collective hung at the first launch of each of the library's kernels).
//      loadKernel loads one ahead of time, as cudaFuncGetAttributes and cuFuncLoad do.
//   9. A stream's queue is bounded: queueing onto a stream that holds kQueueDepth items waits
//      until one completes (CUDA: about a thousand launches per stream, then the launch
//      blocks; measured by others, e.g. stackoverflow.com/questions/53970187; not documented).
//      So a call that queues a collective's device work whole can wait there for the
//      collective's own progress. Where CUDA would wait forever, the stand-in gives up after
//      kSyncLimit and throws, naming the full stream. Tests may shrink the bound.
//
// Memory is host memory; "device memory" is whatever the engine treats as such.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace rr::fake {

struct Stream;
struct Event;

constexpr std::chrono::microseconds kLatency{200};
constexpr std::chrono::seconds kSyncLimit{20};
constexpr size_t kQueueDepth = 1024;  // rule 9, unless setQueueDepthForTests
// Tests of the stand-in itself shorten the limit of rule 5 (and of destroyStream).
void setSyncLimitForTests(std::chrono::milliseconds limit);
// Tests: the bound of rule 9 (0: kQueueDepth).
void setQueueDepthForTests(size_t depth);

// Streams. `nonBlocking`: not ordered with the legacy default stream. legacyStream() is
// stream NULL; a null Stream* given to any call below means it too.
Stream* createStream(bool nonBlocking = false);
void destroyStream(Stream* stream);  // waits for its queued work (like cudaStreamDestroy, later)
Stream* legacyStream();

// A kernel named `kernel`: `work` runs on the stream's thread, in order, after kLatency. Its
// first launch in the process loads it (rule 8), which may throw as synchronizeDevice does.
void launch(Stream* stream, const std::string& kernel, std::function<void()> work);
// Loads `kernel` now if it is not loaded (rule 8: an implicit synchronisation).
void loadKernel(const std::string& kernel);
// A host function: while it runs, nothing starts on any stream (rule 2).
void launchHostFunc(Stream* stream, std::function<void()> fn);

Event* createEvent();
void destroyEvent(Event* event);
void recordEvent(Event* event, Stream* stream);
void streamWaitEvent(Stream* stream, Event* event);
bool eventQuery(Event* event);  // the event's last record has completed (or it has none)

// The stream waits until (int32_t)(addr->load() - value) >= 0; the host writes *addr.
void streamWaitValue(Stream* stream, const std::atomic<uint32_t>* addr, uint32_t value);
// Once the work queued before it on the stream has completed, *addr = value (cuStreamWriteValue32).
void streamWriteValue(Stream* stream, std::atomic<uint32_t>* addr, uint32_t value);

bool streamQuery(Stream* stream);  // every item queued on it has completed
// Waits until the stream is idle; false if it is not within `limit`.
bool streamSynchronize(Stream* stream, std::chrono::milliseconds limit);
// An implicitly synchronising call named `call` (rule 5); throws std::runtime_error after
// kSyncLimit naming the busy stream and what it is waiting on.
void synchronizeDevice(const char* call);

// What each stream is doing now, one line each (for failure messages).
std::string describeState();

}  // namespace rr::fake
