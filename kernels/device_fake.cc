// A stand-in GPU in host memory for tests of the engine's device path on machines without
// one (RR_TEST_FAKE_DEVICE=1). Work is queued like on a stream and runs in order only while
// finished() is polled, the oldest operation on its third poll, so a result that the engine
// reads before its ticket is finished is stale; staging is filled with a pattern so that
// bytes never written are not zeros.
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>

#include "kernels/device.h"
#include "kernels/reduce.h"
#include "kernels/dtype.h"

namespace rr {
namespace {

class FakeDevice final : public Device {
 public:
  std::string describe() const override { return "fake GPU (host memory, for tests)"; }
  int ordinal() const override { return 0; }
  void makeCurrent() override {}

  void* allocStaging(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) throw DeviceError("fake device: out of memory");
    std::memset(p, 0xa5, bytes);
    return p;
  }
  void freeStaging(void* p) override { std::free(p); }

  uint64_t reduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                         rr_dtype_t dtype, rr_op_t op, int avgRanks) override {
    return enqueue([=] {
      reduceReference(dst, mine, in, count, dtype, op);
      if (op == RR_AVG && avgRanks > 1) finalizeAvg(dst, count, dtype, avgRanks);
      if (out != nullptr) std::memcpy(out, dst, count * dtypeSize(dtype));
    });
  }

  uint64_t copy(void* dst, const void* src, size_t bytes) override {
    return enqueue([=] { std::memmove(dst, src, bytes); });
  }

  bool finished(uint64_t ticket) override {
    if (!pending_.empty() && --pending_.front().polls == 0) {
      pending_.front().run();
      pending_.pop_front();
      ++completed_;
    }
    return ticket <= completed_;
  }

  void waitEvent(void*) override {}

 private:
  struct Op {
    std::function<void()> run;
    int polls = 3;  // runs on its third poll as the oldest operation
  };

  uint64_t enqueue(std::function<void()> work) {
    pending_.push_back(Op{std::move(work)});
    return ++issued_;
  }

  std::deque<Op> pending_;
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
};

}  // namespace

std::unique_ptr<Device> openFakeDevice() { return std::make_unique<FakeDevice>(); }

}  // namespace rr
