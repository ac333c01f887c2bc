// The stand-in GPU: streams, events, kernels and host functions in host memory, for tests of
// the engine's device path and stream ordering on machines without a GPU
// (RR_TEST_FAKE_DEVICE=1). One per process, like a CUDA context on one device.
//
// A stand-in is worth only the rules of the real thing it keeps (STYLE.md §11). These are
// CUDA's rules, each enforced here and each tested in test/test_fake_gpu.cc to fail where
// CUDA fails:
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
//   5. A call that implicitly synchronises the device (cudaHostAlloc, cudaFreeHost,
//      cudaDeviceSynchronize, ...) waits until every stream is idle. Where CUDA would wait
//      forever, the stand-in throws after `kSyncLimit`, naming the stream still busy.
//   6. Kernels finish late: a kernel starts no earlier than `kLatency` after it was queued,
//      so a result read before its completion was observed is stale.
//
// Memory is host memory; "device memory" is whatever the engine treats as such.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace rr::fake {

struct Stream;
struct Event;

constexpr std::chrono::microseconds kLatency{200};
constexpr std::chrono::seconds kSyncLimit{20};
// Tests of the stand-in itself shorten the limit of rule 5 (and of destroyStream).
void setSyncLimitForTests(std::chrono::milliseconds limit);

// Streams. `nonBlocking`: not ordered with the legacy default stream. legacyStream() is
// stream NULL; a null Stream* given to any call below means it too.
Stream* createStream(bool nonBlocking = false);
void destroyStream(Stream* stream);  // waits for its queued work (like cudaStreamDestroy, later)
Stream* legacyStream();

// A kernel: `work` runs on the stream's thread, in order, after kLatency.
void launch(Stream* stream, std::function<void()> work);
// A host function: while it runs, nothing starts on any stream (rule 2).
void launchHostFunc(Stream* stream, std::function<void()> fn);

Event* createEvent();
void destroyEvent(Event* event);
void recordEvent(Event* event, Stream* stream);
void streamWaitEvent(Stream* stream, Event* event);
bool eventQuery(Event* event);  // the event's last record has completed (or it has none)

// The stream waits until (int32_t)(addr->load() - value) >= 0; the host writes *addr.
void streamWaitValue(Stream* stream, const std::atomic<uint32_t>* addr, uint32_t value);

bool streamQuery(Stream* stream);  // every item queued on it has completed
// Waits until the stream is idle; false if it is not within `limit`.
bool streamSynchronize(Stream* stream, std::chrono::milliseconds limit);
// An implicitly synchronising call named `call` (rule 5); throws std::runtime_error after
// kSyncLimit naming the busy stream and what it is waiting on.
void synchronizeDevice(const char* call);

// What each stream is doing now, one line each (for failure messages).
std::string describeState();

}  // namespace rr::fake
