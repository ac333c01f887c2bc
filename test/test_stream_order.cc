// Stream ordering (engine/run/stream_order.h) on the stand-in GPU (kernels/fake_gpu.h, which
// keeps CUDA's stream rules): work the caller queues after a call waits on the GPU until the
// request completes, failed or not; releases are cumulative (a request that completes early
// lets no stream go before the ones ahead of it); a host bucket's pass starts only once the
// work queued before the call is done, and a stream that never gets there is a named timeout.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "base/error.h"
#include "engine/run/request.h"
#include "engine/run/stream_order.h"
#include "kernels/device.h"
#include "kernels/fake_gpu.h"

namespace {

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

// The test's kernels are loaded before any stream is held: a first launch loads a kernel,
// which synchronises the device (the stand-in's rule 8), as a program's own kernels must be.
void loadKernels() {
  rr::fake::loadKernel("test_marker");
  rr::fake::loadKernel("test_slow_writer");
}

// A marker the caller queues on its stream: set once the stream gets there.
std::shared_ptr<std::atomic<bool>> marker(rr::fake::Stream* stream) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  rr::fake::launch(stream, "test_marker", [done] { done->store(true); });
  return done;
}

bool within(const std::shared_ptr<std::atomic<bool>>& flag, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!flag->load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A host bucket ordered on `stream` (no device work), queued by `order`.
void orderHost(rr::StreamOrder& order, rr::Request& r, rr::fake::Stream* stream) {
  r.desc = rr::OpDesc{0, rr::Collective::kAllReduce, RR_FLOAT32, RR_SUM, 0, 16};
  order.order(r, stream, nullptr, [] {});
}

}  // namespace

TEST_CASE("work queued after a call waits on the GPU until the request completes, failed or not") {
  loadKernels();
  auto device = rr::openFakeDevice();
  rr::StreamOrder order(*device);
  rr::fake::Stream* stream = rr::fake::createStream();
  for (bool failed : {false, true}) {
    rr::Request r;
    orderHost(order, r, stream);
    auto after = marker(stream);
    CHECK_FALSE(within(after, 50ms));  // held
    order.start(r, 0, 1000, std::atomic<bool>{false});
    order.finished(r.orderNumber, r.programEnd, failed);
    CHECK(within(after, 2000ms));
  }
  rr::fake::destroyStream(stream);
}

TEST_CASE("releases are cumulative: a request that completes first lets no stream go ahead of an earlier one") {
  loadKernels();
  auto device = rr::openFakeDevice();
  rr::StreamOrder order(*device);
  rr::fake::Stream* stream = rr::fake::createStream();
  rr::Request first, second;
  orderHost(order, first, stream);
  auto afterFirst = marker(stream);
  orderHost(order, second, stream);
  auto afterSecond = marker(stream);
  order.finished(second.orderNumber, second.programEnd, false);
  CHECK_FALSE(within(afterFirst, 50ms));
  CHECK_FALSE(afterSecond->load());
  order.dropEvent(first.startEvent);
  order.dropEvent(second.startEvent);
  order.finished(first.orderNumber, first.programEnd, false);
  CHECK(within(afterFirst, 2000ms));
  CHECK(within(afterSecond, 2000ms));
  rr::fake::destroyStream(stream);
}

TEST_CASE("a host bucket's pass starts once the work queued before the call is done; else a named timeout") {
  loadKernels();
  auto device = rr::openFakeDevice();
  rr::StreamOrder order(*device);
  rr::fake::Stream* stream = rr::fake::createStream();
  std::atomic<bool> slowDone{false};
  rr::fake::launch(stream, "test_slow_writer", [&slowDone] {
    std::this_thread::sleep_for(100ms);
    slowDone.store(true);
  });
  rr::Request r;
  orderHost(order, r, stream);
  order.start(r, 0, 5000, std::atomic<bool>{false});
  CHECK(slowDone.load());  // start returned only after the writer
  order.finished(r.orderNumber, r.programEnd, false);
  // A stream held by a value nothing raises: the pass never starts, and says why.
  std::atomic<uint32_t> never{0};
  rr::fake::streamWaitValue(stream, &never, 1);
  rr::Request stuck;
  orderHost(order, stuck, stream);
  CHECK_THROWS_WITH(order.start(stuck, 2, 100, std::atomic<bool>{false}),
                    Contains("op #0 allreduce(count=16, dtype=float, op=sum) on rank 2: the work queued on its stream "
                             "before it") && Contains("did not finish within 100 ms"));
  order.finished(stuck.orderNumber, stuck.programEnd, true);
  never.store(1);
  rr::fake::destroyStream(stream);
}
