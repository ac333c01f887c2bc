// The pass agreement (engine/run/agreement.h, fusion_agreement.h) of 2 to 5 ranks in one
// process, over in-memory links (test/memory_link.h): headers checked before data, fusion
// proposals cut and decided, a proposal absorbed by a rank running alone and dropped later
// as stale, recursive doubling partners, abort frames and the loss they explain, and every
// mismatch named. Passes carry no data here: the schedule's counters stand at the end, so
// what remains of a pass is its headers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/plan/rd_schedule.h"
#include "engine/run/agreement.h"
#include "engine/run/fusion_agreement.h"
#include "engine/run/fusion_group.h"
#include "engine/run/op_queue.h"
#include "test/memory_link.h"

namespace {

using Catch::Matchers::Contains;
using rr::test::MemoryLink;

// n ranks' agreements over in-memory links: the ring's and recursive doubling partners'.
struct Job {
  int n;
  std::vector<std::unique_ptr<MemoryLink>> right, left;
  std::vector<std::vector<std::unique_ptr<MemoryLink>>> partners;
  std::vector<std::unique_ptr<rr::EventSet>> events;
  std::vector<std::unique_ptr<rr::Agreement>> agreements;

  explicit Job(int size) : n(size), right(size), left(size), partners(size) {
    for (int r = 0; r < n; ++r) {
      auto [a, b] = MemoryLink::pair(r, (r + 1) % n, n, "right neighbour", "left neighbour");
      right[r] = std::move(a);
      left[(r + 1) % n] = std::move(b);
    }
    for (int r = 0; r < n; ++r)
      for (int p : rr::rdPartners(r, n)) {
        if (!rr::rdConnects(r, p)) continue;
        auto [a, b] = MemoryLink::pair(r, p, n, "recursive doubling partner", "recursive doubling partner");
        partners[r].push_back(std::move(a));
        partners[p].push_back(std::move(b));
      }
    for (int r = 0; r < n; ++r) {
      events.push_back(std::make_unique<rr::EventSet>());
      std::vector<rr::Link*> mine;
      for (auto& l : partners[r]) mine.push_back(l.get());
      agreements.push_back(std::make_unique<rr::Agreement>(r, n, *left[r], *right[r], mine, *events[r], 2000));
    }
  }
  rr::Agreement& operator[](int r) { return *agreements[r]; }
};

rr::GroupHeader header(uint64_t seq, uint64_t count, rr::Algorithm algo = rr::Algorithm::kRing, uint32_t ops = 1) {
  rr::GroupHeader h;
  h.firstSeq = seq;
  h.numOps = ops;
  h.algo = algo;
  for (uint32_t i = 0; i < ops; ++i) h.counts[i] = count;
  return h;
}

rr::Schedule scheduleOf(int rank, int size, const rr::GroupHeader& h) {
  rr::ScheduleParams p;
  p.rank = rank;
  p.size = size;
  p.count = h.counts[0] * h.numOps;
  p.segElems = 1024;
  p.depth = rr::kSegmentsInFlight;
  p.algo = h.algo;
  p.pairLink = size == 2 && h.algo == rr::Algorithm::kRd;
  return rr::Schedule(p);
}

// Runs one pass on every rank at once, each with its header (and the left's, heard
// already); returns each rank's error ("" where it settled).
std::vector<std::string> runPasses(Job& job, const std::vector<rr::GroupHeader>& mine,
                                   const std::vector<const rr::GroupHeader*>& heard = {}) {
  std::vector<std::string> errors(job.n);
  std::vector<rr::Schedule> schedules;
  std::vector<bool> done(job.n, false);
  for (int r = 0; r < job.n; ++r) schedules.push_back(scheduleOf(r, job.n, mine[r]));
  for (int r = 0; r < job.n; ++r) {
    try {
      job[r].open(mine[r], schedules[r].usesPartners(), heard.empty() ? nullptr : heard[r]);
    } catch (const rr::Error& e) {
      errors[r] = e.what();
      done[r] = true;
    }
  }
  for (int round = 0; round < 1000 && !std::all_of(done.begin(), done.end(), [](bool d) { return d; }); ++round)
    for (int r = 0; r < job.n; ++r) {
      if (done[r]) continue;
      const size_t units = schedules[r].numUnits();
      const rr::PassCounters c{units, units, units, units};  // no data here: only the headers are left
      try {
        job[r].pollPartners(schedules[r], c);
        job[r].progressLinks(mine[r].firstSeq);
        job[r].pollLeft();
        if (job[r].settled()) {
          job[r].close(mine[r].firstSeq + mine[r].numOps - 1);
          done[r] = true;
        }
      } catch (const rr::Error& e) {
        errors[r] = e.what();
        done[r] = true;
      }
    }
  for (int r = 0; r < job.n; ++r)
    if (!done[r]) errors[r] = "did not settle";
  return errors;
}

// One rank's pass, on its own thread: open, then rounds until its headers are through.
void runOne(rr::Agreement& a, const rr::GroupHeader& mine, const rr::GroupHeader* left) {
  const rr::Schedule s = scheduleOf(a.rank(), a.size(), mine);
  a.open(mine, s.usesPartners(), left);
  const rr::PassCounters c{s.numUnits(), s.numUnits(), s.numUnits(), s.numUnits()};
  for (int round = 0; round < 200000; ++round) {
    a.pollPartners(s, c);
    a.progressLinks(mine.firstSeq);
    a.pollLeft();
    if (a.settled()) {
      a.close(mine.firstSeq + mine.numOps - 1);
      return;
    }
    std::this_thread::yield();
  }
  rr::fail(RR_ERR_TIMEOUT, "rank {}: the pass did not settle", a.rank());
}

// Waits between passes for `a`, bounded, as the progress engine waits (without its stall reports).
rr::HeaderWaits waitsFor(rr::Agreement& a) {
  return rr::HeaderWaits{[&a](const rr::OpDesc& next) {
                           for (int i = 0; i < 200000; ++i) {
                             if (std::optional<rr::Heard> h = a.nextHeader()) return *h;
                             a.progressLinks(next.seq);
                             std::this_thread::yield();
                           }
                           rr::fail(RR_ERR_TIMEOUT, "rank {}: no header came", a.rank());
                         },
                         [&a](const rr::GroupHeader& proposal) {
                           const uint64_t sent = a.postProposal(proposal);
                           while (!a.sent(sent)) a.progressLinks(proposal.firstSeq);
                         }};
}

// A rank's queue of `count` async all-reduces of `elems` floats each.
struct Queue {
  rr::OpQueue queue;
  std::deque<std::vector<float>> buffers;
  Queue(size_t count, size_t elems) {
    for (size_t i = 0; i < count; ++i) add(elems);
  }
  void add(size_t elems) {
      std::vector<float>& b = buffers.emplace_back(elems);
    auto r = std::make_shared<rr::Request>();
    r->desc = rr::OpDesc{0, rr::Collective::kAllReduce, RR_FLOAT32, RR_SUM, 0, elems};
    r->send = r->recv = b.data();
    r->bytes = elems * sizeof(float);
    queue.push(r);
  }
};

// Every rank decides its next pass and runs it, each on a thread of its own, as its
// progress thread would; own headers run `algo`. Returns each rank's error ("" if none) and
// how many collectives its pass carried.
std::vector<std::pair<std::string, size_t>> decideAndRun(Job& job, std::deque<Queue>& queues, size_t fusionBytes,
                                                         rr::Algorithm algo) {
  std::vector<std::pair<std::string, size_t>> out(job.n);
  std::vector<std::thread> threads;
  for (int r = 0; r < job.n; ++r)
    threads.emplace_back([&, r] {
      try {
        const rr::PassDecision d = rr::decidePass(job[r], queues[r].queue, waitsFor(job[r]), fusionBytes);
        auto ops = queues[r].queue.pop(d.count);
        rr::GroupHeader mine = d.header ? *d.header : rr::passHeader(ops, ops.size());
        if (!d.header) mine.algo = algo;
        runOne(job[r], mine, d.left ? &*d.left : nullptr);
        out[r].second = ops.size();
      } catch (const rr::Error& e) {
        out[r].first = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("the ring: every rank checks its left neighbour's header before its data (n 2 to 5)") {
  for (int n = 2; n <= 5; ++n) {
    Job job(n);
    std::vector<rr::GroupHeader> mine(n, header(1, 1024));
    const auto errors = runPasses(job, mine);
    for (int r = 0; r < n; ++r) CHECK(errors[r] == "");
    // And the next collective on the same links.
    mine.assign(n, header(2, 77));
    for (const auto& e : runPasses(job, mine)) CHECK(e == "");
  }
}

TEST_CASE("a rank that called another count is named, with both calls and the field that differs") {
  Job job(4);
  std::vector<rr::GroupHeader> mine(4, header(1, 1024));
  mine[2] = header(1, 2048);
  const auto errors = runPasses(job, mine);
  CHECK_THAT(errors[3], Contains("ranks disagree on a collective: rank 2 called op #1 allreduce(count=2048") &&
                            Contains("rank 3 called op #1 allreduce(count=1024") &&
                            Contains("they differ in count 2048 against 1024"));
  CHECK_THAT(errors[2], Contains("rank 1 called op #1 allreduce(count=1024"));
}

TEST_CASE("a root that differs on an all-reduce is named as the field that differs") {
  Job job(3);
  std::vector<rr::GroupHeader> mine(3, header(1, 8));
  mine[0].root = 5;
  CHECK_THAT(runPasses(job, mine)[1], Contains("they differ in root 5 against 0"));
}

TEST_CASE("recursive doubling: each partner's header is checked before its data (n 2 to 5)") {
  for (int n = 2; n <= 5; ++n) {
    Job job(n);
    std::vector<rr::GroupHeader> mine(n, header(1, 256, rr::Algorithm::kRd));
    for (const auto& e : runPasses(job, mine)) CHECK(e == "");
    mine.assign(n, header(2, 256, rr::Algorithm::kRd));
    mine[n - 1].counts[0] = 255;
    const auto errors = runPasses(job, mine);
    // Every partner of the last rank names it; nobody settles with a wrong header.
    for (int p : rr::rdPartners(n - 1, n)) CHECK_THAT(errors[p], Contains("rank " + std::to_string(n - 1) + " called op #2"));
  }
}

TEST_CASE("a partner's header on a ring pass names the algorithm mismatch") {
  Job job(4);
  std::vector<rr::GroupHeader> mine(4, header(1, 256, rr::Algorithm::kRd));
  mine[0] = header(1, 256, rr::Algorithm::kRing);
  const auto errors = runPasses(job, mine);
  bool named = false;
  for (const auto& e : errors) named = named || e.find("ranks disagree on the algorithm of op #1") != std::string::npos;
  CHECK(named);
}

TEST_CASE("fusion: rank 0's proposal is cut by every rank to what it has queued (n 2 to 5)") {
  for (int n = 2; n <= 5; ++n) {
    Job job(n);
    std::deque<Queue> queues;
    for (int r = 0; r < n; ++r) queues.emplace_back(r == n / 2 ? 2 : 4, 256);  // one rank has 2
    const auto results = decideAndRun(job, queues, 4 << 20, rr::Algorithm::kRing);
    for (int r = 0; r < n; ++r) {
      INFO("n " << n << ", rank " << r << ": " << results[r].first);
      CHECK(results[r].first == "");
      CHECK(results[r].second == 2);
    }
  }
}

TEST_CASE("a rank with one collective starts it alone; the proposal that reaches it ends there, and is dropped later where it lingers") {
  // On the ring the proposal reaches the rank running alone, which absorbs it; by recursive
  // doubling that rank reads nothing on its ring link, and drops the proposal once it is a
  // collective it has completed.
  for (rr::Algorithm algo : {rr::Algorithm::kRing, rr::Algorithm::kRd}) {
    Job job(4);
    std::deque<Queue> queues;
    for (size_t have : {3, 1, 3, 3}) queues.emplace_back(have, 256);
    for (int round = 0; round < 2; ++round) {
      const auto results = decideAndRun(job, queues, 4 << 20, algo);
      for (int r = 0; r < 4; ++r) {
        INFO("algorithm " << rr::algorithmName(algo) << ", round " << round << ", rank " << r);
        CHECK(results[r].first == "");
        CHECK(results[r].second == 1);
      }
      queues[1].add(256);  // rank 1's next, the others have theirs queued
    }
  }
}

TEST_CASE("a decision beyond this rank's RR_FUSION_BYTES is a protocol error naming the sender") {
  Job job(3);
  std::deque<Queue> queues;
  for (int r = 0; r < 3; ++r) queues.emplace_back(8, 1024);  // 8 x 4 KiB
  // Rank 2 hears a pass header of all 8 from its left neighbour, as a liar would send it.
  rr::GroupHeader lie = header(1, 1024, rr::Algorithm::kRing, 8);
  uint8_t bytes[rr::GroupHeader::kBytes];
  lie.encode(bytes);
  job.left[2]->wire().push(0, static_cast<uint32_t>(rr::FrameType::kOpHeader), bytes, rr::GroupHeader::kFixedBytes);
  job.left[2]->wire().push(0, static_cast<uint32_t>(rr::FrameType::kOpHeader), bytes + rr::GroupHeader::kFixedBytes,
                           lie.restBytes());
  try {
    rr::decidePass(job[2], queues[2].queue, waitsFor(job[2]), 16384);
    FAIL("decided");
  } catch (const rr::Error& e) {
    CHECK(e.code() == RR_ERR_SYSTEM);
    CHECK_THAT(e.what(), Contains("protocol error: rank 1 sent a pass header of 8 all-reduces (32768 bytes)") &&
                             Contains("more than rank 2 may fuse (RR_FUSION_BYTES=16384)"));
  }
  CHECK(queues[2].queue.pop(8).size() == 8);  // nothing was taken
}

TEST_CASE("an abort frame fails the pass; one of a later collective fails the next call instead") {
  Job job(2);
  std::vector<rr::GroupHeader> mine(2, header(7, 64));
  job.right[1]->sendAbort(1, RR_ERR_TIMEOUT, 7, "rank 1 timed out");  // to rank 0 on its left link
  const auto errors = runPasses(job, mine);
  CHECK_THAT(errors[0], Contains("rank 1 aborted the job: rank 1 timed out"));
  // A later collective's abort: this pass completes, the next open throws it.
  Job later(3);
  later.right[2]->sendAbort(2, RR_ERR_TIMEOUT, 9, "rank 2 timed out in op #9");  // to rank 0
  std::vector<rr::GroupHeader> eight(3, header(8, 64));
  for (const auto& e : runPasses(later, eight)) CHECK(e == "");
  CHECK_THROWS_WITH(later[0].open(header(9, 64), false, nullptr), Contains("rank 2 timed out in op #9"));
}

TEST_CASE("a lost connection yields to another link's abort frame, which names the first failure") {
  // Rank 1 of 4 runs recursive doubling with partners 0 and 3: partner 0's link closes
  // (seen first: it is read first), and partner 3's abort frame comes with it.
  Job job(4);
  job[1].open(header(1, 64, rr::Algorithm::kRd), true, nullptr);
  const auto linkTo = [&job](int from, int to) -> MemoryLink& {
    for (auto& l : job.partners[from])
      if (l->peerRank() == to) return *l;
    throw std::logic_error("no such partner link");
  };
  linkTo(0, 1).shutdown();
  linkTo(3, 1).sendAbort(3, RR_ERR_TIMEOUT, 1, "rank 3 saw it first");
  CHECK_THROWS_WITH(job[1].progressLinks(1), Contains("rank 3 aborted the job: rank 3 saw it first"));
  // Without an abort frame the loss is this rank's own view.
  Job alone(4);
  alone[1].open(header(1, 64, rr::Algorithm::kRd), true, nullptr);
  for (auto& l : alone.partners[0])
    if (l->peerRank() == 1) l->shutdown();
  CHECK_THROWS_WITH(alone[1].progressLinks(1), Contains("rank 0 (recursive doubling partner) closed the connection"));
}

TEST_CASE("an abort frame naming a rank outside the job is a protocol error naming the peer") {
  Job job(2);
  job.right[1]->sendAbort(2147483647, RR_ERR_TIMEOUT, 1, "lie");
  std::vector<rr::GroupHeader> mine(2, header(1, 64));
  const auto errors = runPasses(job, mine);
  CHECK_THAT(errors[0], Contains("protocol error: rank 1 (left neighbour) sent an abort frame naming rank 2147483647"));
}

TEST_CASE("a header no rank could send is a protocol error; a fused pass against one collective a mismatch") {
  Job job(2);
  rr::GroupHeader bad = header(1, 64);
  uint8_t bytes[rr::GroupHeader::kBytes];
  bad.encode(bytes);
  bytes[16] = 99;  // the dtype
  job.right[1]->wire().push(job.right[1]->end(), static_cast<uint32_t>(rr::FrameType::kOpHeader), bytes,
                           rr::GroupHeader::kFixedBytes);  // from rank 1, to rank 0 on its left link
  std::vector<rr::GroupHeader> mine(2, header(1, 64));
  CHECK_THAT(runPasses(job, mine)[0], Contains("protocol error: rank 1 sent an op header with 1 ops, kind 0, dtype 99"));
  Job fused(3);
  std::vector<rr::GroupHeader> two(3, header(1, 64, rr::Algorithm::kRing, 2));
  two[1] = header(1, 64);
  CHECK_THAT(runPasses(fused, two)[2], Contains("rank 1 runs 1 collectives in one pass"));
}
