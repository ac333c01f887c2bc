// RingSchedule against the closed form of DESIGN.md §4, and a simulation that runs every
// rank's schedule in memory and checks the final buffers, for n = 1..16 and the counts
// 0, 1, n-1, n, n+1, primes, and more than one round of segments; recursive doubling's
// units (rd_schedule.h) the same way at n = 2, with the order of their operands.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "engine/rd_schedule.h"
#include "engine/ring_schedule.h"
#include "transport/error.h"

using rr::Buffer;
using rr::Collective;
using rr::RingSchedule;
using rr::ScheduleParams;
using rr::Unit;
using rr::collectiveName;

namespace {

int mod(int x, int n) { return ((x % n) + n) % n; }

RingSchedule make(Collective kind, int rank, int n, size_t count, size_t seg, int depth, int root = 0,
                  rr::Algorithm algo = rr::Algorithm::kRing) {
  ScheduleParams p;
  p.algo = algo;
  p.kind = kind;
  p.rank = rank;
  p.size = n;
  p.count = count;
  p.segElems = seg;
  p.depth = depth;
  p.root = root;
  return RingSchedule(p);
}

// Which block an element offset of the full layout belongs to.
int blockOf(const RingSchedule& s, int n, size_t offset) {
  for (int b = 0; b < n; ++b)
    if (offset >= s.blockBegin(b) && offset < s.blockBegin(b) + s.blockSize(b)) return b;
  return -1;
}

std::vector<size_t> countsFor(int n, size_t seg, int depth) {
  const size_t nn = static_cast<size_t>(n);
  return {0, 1, nn > 1 ? nn - 1 : 1, nn, nn + 1, 7, 13, 101, seg * depth * nn * 2 + 3};
}

// Runs all ranks' schedules in unit order (a valid order: a send only depends on receives
// at least `depth` units earlier) and returns every rank's receive buffer.
std::vector<std::vector<int64_t>> simulate(Collective kind, int n, size_t count, size_t seg,
                                           int depth, int root,
                                           const std::vector<std::vector<int64_t>>& input,
                                           rr::Algorithm algo = rr::Algorithm::kRing) {
  std::vector<RingSchedule> s;
  for (int r = 0; r < n; ++r) s.push_back(make(kind, r, n, count, seg, depth, root, algo));
  const size_t recvLen = kind == Collective::kAllGather ? count * n : count;
  std::vector<std::vector<int64_t>> recv(n, std::vector<int64_t>(recvLen, -999));
  if (kind == Collective::kBroadcast) recv[root] = input[root];
  if (kind == Collective::kAllGather)
    for (int r = 0; r < n; ++r)
      std::copy(input[r].begin(), input[r].end(), recv[r].begin() + static_cast<long>(r * count));
  std::vector<std::map<size_t, std::vector<int64_t>>> stage(n);
  const size_t units = n > 1 ? s[0].numUnits() : 0;
  for (int r = 1; r < n; ++r) REQUIRE(s[r].numUnits() == units);
  // Like the engine: rank r posts send k once its receive of unit dependsOn is done, and
  // receives unit k once its left neighbour has sent unit k (links are FIFO queues).
  std::vector<size_t> sent(n, 0), received(n, 0);
  std::vector<std::vector<std::vector<int64_t>>> link(n);  // link[r]: messages to rank r
  std::vector<size_t> linkHead(n, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      while (sent[r] < units) {
        const rr::Unit u = s[r].unit(sent[r]);
        if (u.dependsOn >= 0 && received[r] <= static_cast<size_t>(u.dependsOn)) break;
        if (u.sendFrom != Buffer::kNone) {
          const int64_t* from = u.sendFrom == Buffer::kSend   ? input[r].data() + u.sendOffset
                                : u.sendFrom == Buffer::kRecv ? recv[r].data() + u.sendOffset
                                                              : stage[r].at(u.sendOffset).data();
          link[(r + 1) % n].emplace_back(from, from + u.sendCount);
        }
        ++sent[r];
        moved = true;
      }
      while (received[r] < units) {
        const rr::Unit u = s[r].unit(received[r]);
        REQUIRE(s[mod(r - 1, n)].unit(received[r]).sendCount == u.recvCount);
        if (u.recvInto != Buffer::kNone) {
          if (linkHead[r] == link[r].size()) break;
          std::vector<int64_t> got = link[r][linkHead[r]++];
          REQUIRE(got.size() == u.recvCount);
          if (u.reduce)
            for (size_t i = 0; i < got.size(); ++i) got[i] += input[r][u.reduceOffset + i];
          if (u.recvInto == Buffer::kStage)
            stage[r][u.recvOffset] = got;
          else
            std::copy(got.begin(), got.end(), recv[r].begin() + static_cast<long>(u.recvOffset));
        }
        ++received[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    REQUIRE(sent[r] == units);
    REQUIRE(received[r] == units);
  }
  return recv;
}

}  // namespace

TEST_CASE("partBegin/partSize cut a range into nearly equal pieces") {
  for (size_t total : {0, 1, 5, 16, 17, 1000}) {
    for (size_t parts : {1, 2, 3, 7, 16}) {
      size_t next = 0;
      for (size_t i = 0; i < parts; ++i) {
        REQUIRE(rr::partBegin(total, parts, i) == next);
        next += rr::partSize(total, parts, i);
        REQUIRE(rr::partSize(total, parts, i) >= total / parts);
        REQUIRE(rr::partSize(total, parts, i) <= total / parts + 1);
      }
      REQUIRE(next == total);
    }
  }
}

TEST_CASE("all-reduce steps follow the closed form") {
  for (int n = 2; n <= 16; ++n) {
    for (size_t count : countsFor(n, 3, 2)) {
      for (int r = 0; r < n; ++r) {
        RingSchedule s = make(Collective::kAllReduce, r, n, count, 3, 2);
        REQUIRE(s.steps() == 2 * (n - 1));
        for (size_t k = 0; k < s.numUnits(); ++k) {
          const rr::Unit u = s.unit(k);
          const int step = static_cast<int>((k / 2) % static_cast<size_t>(s.steps()));
          if (u.sendCount > 0) {
            const int want = step < n - 1 ? mod(r - step, n) : mod(r + 1 - (step - n + 1), n);
            REQUIRE(blockOf(s, n, u.sendOffset) == want);
            REQUIRE(u.sendFrom == (step == 0 ? Buffer::kSend : Buffer::kRecv));
          }
          if (u.recvCount > 0) {
            const int want = step < n - 1 ? mod(r - step - 1, n) : mod(r - (step - n + 1), n);
            REQUIRE(blockOf(s, n, u.recvOffset) == want);
            REQUIRE(u.reduce == (step < n - 1));
            REQUIRE(u.lastReduce == (step == n - 2));
          }
          REQUIRE(u.dependsOn == (step == 0 ? -1 : static_cast<int64_t>(k) - 2));
        }
      }
    }
  }
}

TEST_CASE("every collective's simulated ring gives the closed-form result") {
  for (int n = 1; n <= 16; ++n) {
    for (size_t count : countsFor(n, 3, 2)) {
      for (Collective kind : {Collective::kAllReduce, Collective::kReduceScatter,
                              Collective::kAllGather, Collective::kBroadcast}) {
        const size_t inLen = kind == Collective::kReduceScatter ? count * n : count;
        std::vector<std::vector<int64_t>> input(n, std::vector<int64_t>(inLen));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < inLen; ++i) input[r][i] = static_cast<int64_t>((r + 1) * 1000003 + i * 7);
        const int root = n > 2 ? 2 : 0;
        if (n == 1) continue;  // the engine copies locally; nothing is scheduled
        auto recv = simulate(kind, n, count, 3, 2, root, input);
        INFO("n=" << n << " count=" << count << " kind=" << rr::collectiveName(kind));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < recv[r].size(); ++i) {
            int64_t want = 0;
            switch (kind) {
              case Collective::kAllReduce:
                for (int q = 0; q < n; ++q) want += input[q][i];
                break;
              case Collective::kReduceScatter:
                for (int q = 0; q < n; ++q) want += input[q][r * count + i];
                break;
              case Collective::kAllGather: want = input[i / count][i % count]; break;
              case Collective::kBroadcast: want = input[root][i]; break;
              case Collective::kBarrier: break;  // never scheduled (runs as an all-reduce)
            }
            REQUIRE(recv[r][i] == want);
          }
        }
      }
    }
  }
}

TEST_CASE("all-reduce sends the bandwidth lower bound 2(n-1)/n of the bucket") {
  for (int n = 2; n <= 16; ++n) {
    const size_t count = static_cast<size_t>(n) * 1000;
    RingSchedule s = make(Collective::kAllReduce, 0, n, count, 64, 4);
    size_t sent = 0;
    for (size_t k = 0; k < s.numUnits(); ++k) sent += s.unit(k).sendCount;
    REQUIRE(sent == 2 * (static_cast<size_t>(n) - 1) * count / static_cast<size_t>(n));
  }
}

TEST_CASE("a forwarding send reads exactly what the unit it depends on received") {
  // The device path relies on this: the send of unit k with dependsOn = j forwards unit j's
  // result from j's staging slot, which stays untouched until the send of unit j + depth.
  for (Collective kind : {Collective::kAllReduce, Collective::kReduceScatter,
                          Collective::kAllGather, Collective::kBroadcast}) {
    for (int n = 2; n <= 7; ++n) {
      for (size_t count : {size_t{1}, size_t{5}, size_t{37}, size_t{1000}}) {
        for (int rank = 0; rank < n; ++rank) {
          ScheduleParams p;
          p.kind = kind;
          p.rank = rank;
          p.size = n;
          p.count = count;
          p.segElems = 3;
          p.depth = 4;
          p.root = n - 1;
          const RingSchedule s(p);
          for (size_t k = 0; k < s.numUnits(); ++k) {
            const Unit u = s.unit(k);
            INFO(collectiveName(kind) << " n=" << n << " count=" << count << " rank=" << rank << " unit " << k);
            if (u.sendFrom == Buffer::kNone) continue;
            if (u.dependsOn < 0) {
              REQUIRE((u.sendFrom == Buffer::kSend || u.sendFrom == Buffer::kRecv));
              continue;
            }
            const size_t j = static_cast<size_t>(u.dependsOn);
            REQUIRE(j <= k);
            REQUIRE(k <= j + static_cast<size_t>(p.depth));
            const Unit from = s.unit(j);
            REQUIRE(from.recvInto == u.sendFrom);
            REQUIRE(from.recvCount == u.sendCount);
            REQUIRE(from.recvOffset == u.sendOffset);
          }
        }
      }
    }
  }
}

TEST_CASE("recursive doubling at n = 2: one exchange of every segment, operands in rank order") {
  const int n = 2;
  for (size_t seg : {size_t{1}, size_t{3}, size_t{64}}) {
    for (size_t count : countsFor(n, seg, 4)) {
      CAPTURE(seg, count);
      std::vector<std::vector<int64_t>> input(n);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) input[r].push_back(static_cast<int64_t>(i * 7 + 1000 * r));
      const auto recv = simulate(Collective::kAllReduce, n, count, seg, 4, 0, input, rr::Algorithm::kRd);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) REQUIRE(recv[r][i] == input[0][i] + input[1][i]);
      for (int r = 0; r < n; ++r) {
        const RingSchedule s = make(Collective::kAllReduce, r, n, count, seg, 4, 0, rr::Algorithm::kRd);
        REQUIRE(s.numUnits() == (count + seg - 1) / seg);
        REQUIRE(s.reduceEnd() == s.numUnits());
        for (size_t k = 0; k < s.numUnits(); ++k) {
          const Unit u = s.unit(k);
          REQUIRE(u.dependsOn == -1);                          // no unit waits for a receive
          REQUIRE(u.afterSend == static_cast<int64_t>(k));     // in place: the send reads first
          REQUIRE(u.sendFrom == Buffer::kSend);
          REQUIRE(u.receivedFirst == (r == 1));                // rank 0's operand first, on both
          REQUIRE((u.firstReduce && u.lastReduce));
        }
      }
    }
  }
}

TEST_CASE("recursive doubling is refused where it is not built") {
  REQUIRE(rr::rdSupports(2));
  for (int n : {1, 3, 4, 8}) REQUIRE_FALSE(rr::rdSupports(n));
  REQUIRE_THROWS_AS(make(Collective::kAllReduce, 0, 4, 100, 8, 4, 0, rr::Algorithm::kRd), rr::Error);
  REQUIRE_THROWS_AS(make(Collective::kAllGather, 0, 2, 100, 8, 4, 0, rr::Algorithm::kRd), rr::Error);
}
