// The stand-in GPU keeps CUDA's rules (kernels/fake_gpu.h): each rule is checked here, and
// in particular that the stand-in fails where a real GPU fails (a host function that waits
// for other device work deadlocks; an implicit synchronisation, a kernel's first load
// among them, waits for a held stream).
// Waits are bounded: a rule that does not hold fails the test, it never hangs it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernels/fake_gpu.h"

namespace fake = rr::fake;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The kernel of the tests of rules 1-7, loaded once before any of them (rule 8 has its own).
const std::string kTest = "a test kernel";
const bool kTestLoaded = (fake::loadKernel(kTest), true);

// Waits up to `limit` for `flag`; true if it was set.
bool waitFor(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!flag.load() && Clock::now() < until) std::this_thread::sleep_for(100us);
  return flag.load();
}

}  // namespace

TEST_CASE("stand-in rule 1: one stream runs in order, streams run concurrently") {
  fake::Stream* a = fake::createStream();
  fake::Stream* b = fake::createStream();
  std::vector<int> seen;
  for (int i = 0; i < 20; ++i) fake::launch(a, kTest, [&seen, i] { seen.push_back(i); });
  REQUIRE(fake::streamSynchronize(a, 5000ms));
  for (int i = 0; i < 20; ++i) REQUIRE(seen[static_cast<size_t>(i)] == i);
  // A kernel on a waits for one on b: only concurrent streams let both finish.
  std::atomic<bool> fromB{false}, aSaw{false};
  fake::launch(a, kTest, [&] { aSaw = waitFor(fromB, 5000ms); });
  fake::launch(b, kTest, [&] { fromB = true; });
  REQUIRE(fake::streamSynchronize(a, 10000ms));
  REQUIRE(aSaw.load());
  fake::destroyStream(a);
  fake::destroyStream(b);
}

TEST_CASE("stand-in rule 2: a running host function stalls every stream, so one that waits "
          "for device work deadlocks") {
  fake::Stream* a = fake::createStream();
  fake::Stream* lib = fake::createStream(/*nonBlocking=*/true);
  std::atomic<bool> kernelRan{false}, hostSawKernel{true}, hostStarted{false};
  // The host function waits (bounded) for a kernel on another stream, as the old holdStream
  // design waited for the engine's kernels. On Hopper that kernel never starts.
  fake::launchHostFunc(a, [&] {
    hostStarted = true;
    hostSawKernel = waitFor(kernelRan, 300ms);
  });
  REQUIRE(waitFor(hostStarted, 5000ms));
  fake::launch(lib, kTest, [&] { kernelRan = true; });
  REQUIRE(fake::streamSynchronize(a, 5000ms));
  CHECK_FALSE(hostSawKernel.load());  // the deadlock, bounded here by the host function's limit
  REQUIRE(fake::streamSynchronize(lib, 5000ms));
  CHECK(kernelRan.load());  // and the kernel runs once the host function returned
  fake::destroyStream(a);
  fake::destroyStream(lib);
}

TEST_CASE("stand-in rule 3: event and value waits hold only their own stream") {
  fake::Stream* a = fake::createStream();
  fake::Stream* b = fake::createStream();
  fake::Stream* c = fake::createStream();
  std::atomic<bool> release{false}, afterEvent{false}, afterValue{false}, other{false};
  fake::Event* e = fake::createEvent();
  fake::launch(a, kTest, [&] { waitFor(release, 5000ms); });
  fake::recordEvent(e, a);
  fake::streamWaitEvent(b, e);
  fake::launch(b, kTest, [&] { afterEvent = true; });
  std::atomic<uint32_t> counter{0};
  fake::streamWaitValue(c, &counter, 3);
  fake::launch(c, kTest, [&] { afterValue = true; });
  fake::Stream* d = fake::createStream();
  fake::launch(d, kTest, [&] { other = true; });
  REQUIRE(fake::streamSynchronize(d, 5000ms));
  CHECK(other.load());
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(afterEvent.load());
  CHECK_FALSE(fake::eventQuery(e));
  CHECK_FALSE(afterValue.load());
  counter = 2;  // not yet: the wait is (int32_t)(*addr - 3) >= 0
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(afterValue.load());
  counter = 3;
  REQUIRE(fake::streamSynchronize(c, 5000ms));
  CHECK(afterValue.load());
  release = true;
  REQUIRE(fake::streamSynchronize(b, 5000ms));
  CHECK(afterEvent.load());
  CHECK(fake::eventQuery(e));
  // A wait queued after a newer record waits for that record, not the old one.
  std::atomic<bool> gate{false}, afterSecond{false};
  fake::launch(a, kTest, [&] { waitFor(gate, 5000ms); });
  fake::recordEvent(e, a);
  fake::streamWaitEvent(b, e);
  fake::launch(b, kTest, [&] { afterSecond = true; });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(afterSecond.load());
  gate = true;
  REQUIRE(fake::streamSynchronize(b, 5000ms));
  CHECK(afterSecond.load());
  // Cyclic comparison across the 32-bit wrap.
  counter = 0xfffffff0u;
  std::atomic<bool> wrapped{false};
  fake::streamWaitValue(c, &counter, 0x10u);
  fake::launch(c, kTest, [&] { wrapped = true; });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(wrapped.load());
  counter = 0x10u;
  REQUIRE(fake::streamSynchronize(c, 5000ms));
  CHECK(wrapped.load());
  fake::destroyEvent(e);
  for (auto* s : {a, b, c, d}) fake::destroyStream(s);
}

TEST_CASE("stand-in rule 4: stream NULL is ordered with blocking streams, not non-blocking ones") {
  fake::Stream* blocking = fake::createStream();
  fake::Stream* nonBlocking = fake::createStream(/*nonBlocking=*/true);
  std::atomic<uint32_t> counter{0};
  std::atomic<bool> onBlocking{false}, onNonBlocking{false};
  fake::streamWaitValue(nullptr, &counter, 1);  // stream NULL held
  fake::launch(blocking, kTest, [&] { onBlocking = true; });
  fake::launch(nonBlocking, kTest, [&] { onNonBlocking = true; });
  REQUIRE(fake::streamSynchronize(nonBlocking, 5000ms));
  CHECK(onNonBlocking.load());
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(onBlocking.load());
  counter = 1;
  REQUIRE(fake::streamSynchronize(blocking, 5000ms));
  CHECK(onBlocking.load());
  // And work on stream NULL waits for earlier work on a blocking stream.
  std::atomic<bool> gate{false}, onLegacy{false};
  fake::launch(blocking, kTest, [&] { waitFor(gate, 5000ms); });
  fake::launch(nullptr, kTest, [&] { onLegacy = true; });
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(onLegacy.load());
  gate = true;
  REQUIRE(fake::streamSynchronize(nullptr, 5000ms));
  CHECK(onLegacy.load());
  fake::destroyStream(blocking);
  fake::destroyStream(nonBlocking);
}

TEST_CASE("stand-in rule 5: an implicit synchronisation waits for every stream, and fails "
          "naming a stream that never finishes") {
  fake::Stream* a = fake::createStream();
  std::atomic<bool> done{false};
  fake::launch(a, kTest, [&] {
    std::this_thread::sleep_for(20ms);
    done = true;
  });
  fake::synchronizeDevice("cudaHostAlloc");
  CHECK(done.load());
  std::atomic<uint32_t> counter{0};
  fake::streamWaitValue(a, &counter, 1);
  fake::setSyncLimitForTests(200ms);
  std::string message;
  try {
    fake::synchronizeDevice("cudaFreeHost");
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  fake::setSyncLimitForTests(std::chrono::duration_cast<std::chrono::milliseconds>(fake::kSyncLimit));
  INFO(message);
  CHECK(message.find("cudaFreeHost") != std::string::npos);
  CHECK(message.find("a value wait") != std::string::npos);
  counter = 1;
  fake::destroyStream(a);
}

TEST_CASE("stand-in rules 6 and 7: kernels finish late; a host function may not call CUDA") {
  fake::Stream* a = fake::createStream();
  std::atomic<bool> ran{false};
  const auto t0 = Clock::now();
  fake::launch(a, kTest, [&] { ran = true; });
  const bool early = ran.load();
  if (Clock::now() - t0 < fake::kLatency) CHECK_FALSE(early);
  REQUIRE(fake::streamSynchronize(a, 5000ms));
  CHECK(ran.load());
  std::string message;
  fake::launchHostFunc(a, [&] {
    try {
      fake::launch(a, kTest, [] {});
    } catch (const std::logic_error& e) {
      message = e.what();
    }
  });
  REQUIRE(fake::streamSynchronize(a, 5000ms));
  CHECK(message.find("called from a host function") != std::string::npos);
  fake::destroyStream(a);
}

TEST_CASE("stand-in rule 8: a kernel's first launch loads it behind an implicit "
          "synchronisation, so launching it while a stream is held never returns; loaded "
          "ahead, it runs") {
  CHECK(kTestLoaded);
  fake::Stream* held = fake::createStream();
  fake::Stream* lib = fake::createStream(/*nonBlocking=*/true);
  std::atomic<uint32_t> counter{0};
  fake::loadKernel("rule 8: loaded ahead");
  fake::streamWaitValue(held, &counter, 1);  // a caller's stream held for a collective
  std::atomic<bool> ran{false};
  fake::launch(lib, "rule 8: loaded ahead", [&] { ran = true; });
  CHECK(fake::streamSynchronize(lib, 5000ms));
  CHECK(ran.load());
  fake::setSyncLimitForTests(200ms);
  std::string message;
  std::atomic<bool> lazyRan{false};
  try {
    fake::launch(lib, "rule 8: first launch", [&] { lazyRan = true; });
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  fake::setSyncLimitForTests(std::chrono::duration_cast<std::chrono::milliseconds>(fake::kSyncLimit));
  INFO(message);
  CHECK(message.find("loading kernel 'rule 8: first launch' at its first launch") != std::string::npos);
  CHECK(message.find("a value wait") != std::string::npos);
  CHECK_FALSE(lazyRan.load());
  counter = 1;  // the release: now the load goes through, and the kernel runs
  fake::launch(lib, "rule 8: first launch", [&] { lazyRan = true; });
  CHECK(fake::streamSynchronize(lib, 5000ms));
  CHECK(lazyRan.load());
  fake::destroyStream(lib);
  fake::destroyStream(held);
}

TEST_CASE("stand-in rule 9: a full stream takes more work only once some completes, so "
          "queueing behind work that waits for later work never returns") {
  fake::setQueueDepthForTests(16);
  fake::Stream* s = fake::createStream(/*nonBlocking=*/true);
  std::atomic<uint32_t> gate{0};
  // The queue fills with waits on a gate that only the host raises: queueing more waits.
  for (size_t i = 0; i < 16; ++i) fake::streamWaitValue(s, &gate, 1);
  fake::setSyncLimitForTests(200ms);
  std::string message;
  try {
    fake::launch(s, kTest, [] {});
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("its queue is full") != std::string::npos);
  // Raised from another thread while the launch waits for room: it then goes in and runs.
  std::atomic<bool> ran{false};
  std::thread host([&] {
    std::this_thread::sleep_for(50ms);
    gate = 1;
  });
  fake::launch(s, kTest, [&] { ran = true; });
  host.join();
  fake::setQueueDepthForTests(0);
  fake::setSyncLimitForTests(std::chrono::duration_cast<std::chrono::milliseconds>(fake::kSyncLimit));
  CHECK(fake::streamSynchronize(s, 5000ms));
  CHECK(ran.load());
  fake::destroyStream(s);
}
