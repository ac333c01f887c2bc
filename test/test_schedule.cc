// Schedule against the closed form (docs/design.md, "Algorithms"), and a simulation that runs every
// rank's schedule in memory and checks the final buffers, for n = 1..16 and the counts
// 0, 1, n-1, n, n+1, primes, and more than one round of segments; recursive doubling's
// units (rd_schedule.h) and halving-doubling's (hd_schedule.h) the same way for n = 2..16,
// with the order of their operands.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "engine/plan/algorithm.h"
#include "engine/setup/config.h"
#include "engine/plan/hd_schedule.h"
#include "engine/plan/rd_schedule.h"
#include "engine/plan/schedule.h"
#include "base/error.h"

using rr::Buffer;
using rr::Collective;
using rr::Schedule;
using rr::ScheduleParams;
using rr::Unit;
using rr::collectiveName;

namespace {

int mod(int x, int n) { return ((x % n) + n) % n; }

Schedule make(Collective kind, int rank, int n, size_t count, size_t seg, int depth, int root = 0,
                  rr::Algorithm algo = rr::Algorithm::kRing, bool pairLink = false) {
  ScheduleParams p;
  p.algo = algo;
  p.pairLink = pairLink;
  p.kind = kind;
  p.rank = rank;
  p.size = n;
  p.count = count;
  p.segElems = seg;
  p.depth = depth;
  p.root = root;
  return Schedule(p);
}

// Which block an element offset of the full layout belongs to.
int blockOf(const Schedule& s, int n, size_t offset) {
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
  std::vector<Schedule> s;
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
        Schedule s = make(Collective::kAllReduce, r, n, count, 3, 2);
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
    Schedule s = make(Collective::kAllReduce, 0, n, count, 64, 4);
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
          const Schedule s(p);
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

TEST_CASE("recursive doubling at n = 2: one exchange of every segment, operands in rank order, on either link") {
  const int n = 2;
  for (const bool pairLink : {false, true})
  for (size_t seg : {size_t{1}, size_t{3}, size_t{64}}) {
    for (size_t count : countsFor(n, seg, 4)) {
      CAPTURE(pairLink, seg, count);
      for (int r = 0; r < n; ++r) {
        const Schedule s = make(Collective::kAllReduce, r, n, count, seg, 4, 0, rr::Algorithm::kRd, pairLink);
        REQUIRE(s.numUnits() == (count + seg - 1) / seg);
        REQUIRE(s.reduceEnd() == s.numUnits());
        REQUIRE(s.usesPartners() == pairLink);
        REQUIRE(rr::rdPartners(r, n) == std::vector<int>{1 - r});  // the pair's link is made at init
        for (size_t k = 0; k < s.numUnits(); ++k) {
          const Unit u = s.unit(k);
          REQUIRE(u.peer == (pairLink ? 1 - r : -1));          // the pair's link, or the ring's
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

namespace {

// An associative op that is not commutative: composition of maps x -> a x + b modulo a
// prime, packed (a << 32 | b). A result equals the composition in rank order only if every
// rank combined the operands in that order (a tree over contiguous ranges, lower first).
constexpr int64_t kPrime = 2147483647;
int64_t compose(int64_t f, int64_t g) {
  const int64_t a1 = f >> 32, b1 = f & 0xffffffff, a2 = g >> 32, b2 = g & 0xffffffff;
  return (a1 * a2 % kPrime) << 32 | ((a1 * b2 + b1) % kPrime);
}

struct Elem {
  int64_t value = 0;
  int ranks = 0;  // how many ranks' inputs are in it
};

// Runs every rank's recursive doubling units over one FIFO queue per ordered pair of ranks
// (a unit sends to and receives from its peer, or the ring's neighbours when peer < 0), as
// the engine orders them: a send once the receive it depends on is done, a reduction once
// its own send has read (afterSend), in place when asked (the send buffer is the result
// buffer). Checks the flags the passes rely on: firstReduce (the received operand is one
// rank's raw input), reduceFrom (kSend: this rank's raw input), lastReduce (all n are in).
std::vector<std::vector<int64_t>> simulateRd(int n, size_t count, size_t seg, bool inPlace, bool composeOp,
                                             const std::vector<std::vector<int64_t>>& input,
                                             rr::Algorithm algo = rr::Algorithm::kRd) {
  std::vector<Schedule> s;
  for (int r = 0; r < n; ++r) s.push_back(make(Collective::kAllReduce, r, n, count, seg, 4, 0, algo));
  const size_t units = s[0].numUnits();
  std::vector<std::vector<Elem>> recv(n, std::vector<Elem>(count));
  std::vector<std::vector<Elem>> send(n, std::vector<Elem>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) send[r][i] = recv[r][i] = Elem{input[r][i], 1};
  auto sendBuf = [&](int r) -> std::vector<Elem>& { return inPlace ? recv[r] : send[r]; };
  std::map<std::pair<int, int>, std::vector<std::vector<Elem>>> queue;
  std::map<std::pair<int, int>, size_t> head;
  std::vector<size_t> sent(n, 0), received(n, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      REQUIRE(s[r].numUnits() == units);
      while (sent[r] < units) {
        const Unit u = s[r].unit(sent[r]);
        if (u.dependsOn >= 0 && received[r] <= static_cast<size_t>(u.dependsOn)) break;
        if (u.sendFrom != Buffer::kNone) {
          REQUIRE(u.sendFrom != Buffer::kStage);
          const auto& from = u.sendFrom == Buffer::kSend ? sendBuf(r) : recv[r];
          REQUIRE(u.sendCount > 0);
          REQUIRE(u.sendCount <= seg);
          const int to = u.peer >= 0 ? u.peer : (r + 1) % n;
          queue[{r, to}].emplace_back(from.begin() + static_cast<long>(u.sendOffset),
                                      from.begin() + static_cast<long>(u.sendOffset + u.sendCount));
        }
        ++sent[r];
        moved = true;
      }
      while (received[r] < units) {
        const Unit u = s[r].unit(received[r]);
        if (u.afterSend >= 0 && sent[r] <= static_cast<size_t>(u.afterSend)) break;
        if (u.recvInto != Buffer::kNone) {
          REQUIRE(u.recvInto == Buffer::kRecv);
          REQUIRE(u.recvCount > 0);
          REQUIRE(u.recvCount <= seg);
          const int from = u.peer >= 0 ? u.peer : mod(r - 1, n);
          auto& q = queue[{from, r}];
          size_t& h = head[{from, r}];
          if (h == q.size()) break;
          const std::vector<Elem> got = q[h++];
          REQUIRE(got.size() == u.recvCount);
          for (size_t i = 0; i < got.size(); ++i) {
            Elem& dst = recv[r][u.recvOffset + i];
            if (!u.reduce) {
              dst = got[i];
              continue;
            }
            const Elem mine = (u.reduceFrom == Buffer::kRecv ? recv[r] : sendBuf(r))[u.reduceOffset + i];
            REQUIRE(u.firstReduce == (got[i].ranks == 1));
            REQUIRE((u.reduceFrom == Buffer::kSend) == (mine.ranks == 1));
            const Elem& first = u.receivedFirst ? got[i] : mine;
            const Elem& second = u.receivedFirst ? mine : got[i];
            dst.value = composeOp ? compose(first.value, second.value) : first.value + second.value;
            dst.ranks = mine.ranks + got[i].ranks;
            REQUIRE(u.lastReduce == (dst.ranks == n));
          }
        }
        ++received[r];
        moved = true;
      }
    }
  }
  std::vector<std::vector<int64_t>> out(n);
  for (int r = 0; r < n; ++r) {
    REQUIRE(sent[r] == units);
    REQUIRE(received[r] == units);
    for (const Elem& e : recv[r]) {
      REQUIRE(e.ranks == n);
      out[r].push_back(e.value);
    }
  }
  for (const auto& [pair, q] : queue) REQUIRE(head[pair] == q.size());  // nothing left unread
  return out;
}

}  // namespace

TEST_CASE("recursive doubling and halving-doubling at n = 3..16: exact sums, the same tree in rank order everywhere") {
  for (const rr::Algorithm algo : {rr::Algorithm::kRd, rr::Algorithm::kHd})
  for (int n = 3; n <= 16; ++n) {
    for (size_t seg : {size_t{1}, size_t{5}}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{4}, size_t{13}, size_t{23}, size_t{64}}) {
        for (bool inPlace : {false, true}) {
          CAPTURE(algo, n, seg, count, inPlace);
          std::vector<std::vector<int64_t>> input(n);
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i)
              input[r].push_back(static_cast<int64_t>(((r + 2) * 7919 + i) % 1000) << 32 |
                                 static_cast<int64_t>((r * 104729 + i * 31) % 100000));
          const auto sums = simulateRd(n, count, seg, inPlace, false, input, algo);
          const auto composed = simulateRd(n, count, seg, inPlace, true, input, algo);
          for (size_t i = 0; i < count; ++i) {
            int64_t sum = 0, inOrder = input[0][i];
            for (int r = 0; r < n; ++r) sum += input[r][i];
            for (int r = 1; r < n; ++r) inOrder = compose(inOrder, input[r][i]);
            for (int r = 0; r < n; ++r) {
              REQUIRE(sums[r][i] == sum);
              REQUIRE(composed[r][i] == inOrder);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("recursive doubling's partners: log2 p exchanges, a fold pair, each link made once") {
  for (int n = 3; n <= 64; ++n) {
    int p = 1, levels = 0;
    while (p * 2 <= n) p *= 2, ++levels;
    const int rem = n - p;
    std::map<std::pair<int, int>, int> seen;
    for (int r = 0; r < n; ++r) {
      const std::vector<int> partners = rr::rdPartners(r, n);
      const size_t want = r < 2 * rem ? (r % 2 == 0 ? 1 : 1 + levels) : levels;
      CAPTURE(n, r);
      REQUIRE(partners.size() <= want);  // fewer only where a fold partner is also an exchange's
      REQUIRE(partners.size() >= std::min<size_t>(want, 1));
      for (int q : partners) {
        REQUIRE(q != r);
        REQUIRE(q >= 0);
        REQUIRE(q < n);
        const std::vector<int> back = rr::rdPartners(q, n);
        REQUIRE(std::find(back.begin(), back.end(), r) != back.end());  // both sides make the link
        ++seen[{std::min(r, q), std::max(r, q)}];
      }
      // Every peer a unit names is a partner (halving-doubling's too).
      for (const rr::Algorithm algo : {rr::Algorithm::kRd, rr::Algorithm::kHd}) {
        const Schedule s = make(Collective::kAllReduce, r, n, 7, 2, 4, 0, algo);
        REQUIRE(s.usesPartners());
        for (size_t k = 0; k < s.numUnits(); ++k) {
          const Unit u = s.unit(k);
          if (u.sendFrom != Buffer::kNone || u.recvInto != Buffer::kNone)
            REQUIRE(std::find(partners.begin(), partners.end(), u.peer) != partners.end());
        }
      }
    }
    for (const auto& [pair, times] : seen) REQUIRE(times == 2);  // once from each side
  }
  REQUIRE(rr::rdPartners(0, 1).empty());
}

TEST_CASE("halving-doubling sends the ring's 2(p-1)/p of the bucket per rank, a small bucket in 2 log2 p - 1 exchanges, the folded pair once more") {
  // At n = 4 the exchange is one step while its range, half the bucket, fits a segment:
  // 1000 of 2000 elements (3 units: halving, exchange, doubling), not 1001 of 2002 (6).
  REQUIRE(make(Collective::kAllReduce, 0, 4, 2000, 1000, 4, 0, rr::Algorithm::kHd).numUnits() == 3);
  REQUIRE(make(Collective::kAllReduce, 0, 4, 2002, 1000, 4, 0, rr::Algorithm::kHd).numUnits() == 6);
  for (int n : {3, 4, 5, 6, 8, 12, 16}) {
    int p = 1, levels = 0;
    while (p * 2 <= n) p *= 2, ++levels;
    const int rem = n - p;
    // A small bucket in 2 log2 p - 1 exchanges (the last halving and the first doubling are
    // one), +2 folds: one unit per step when a segment holds the bucket.
    for (int r = 0; r < n; ++r)
      REQUIRE(make(Collective::kAllReduce, r, n, 64, 1000, 4, 0, rr::Algorithm::kHd).numUnits() ==
              static_cast<size_t>(2 * levels - 1 + (rem > 0 ? 2 : 0)));
    for (size_t count : {size_t{64}, size_t{1000}, size_t{4096}}) {
      // Exact when p divides the bucket, else off by at most an element per exchange.
      const double slack = count % static_cast<size_t>(p) == 0 ? 0.0 : 2.0 * levels;
      for (int r = 0; r < n; ++r) {
        const Schedule s = make(Collective::kAllReduce, r, n, count, 37, 4, 0, rr::Algorithm::kHd);
        size_t sent = 0, exchanges = 0;
        for (size_t k = 0; k < s.numUnits(); ++k) sent += s.unit(k).sendCount;
        CAPTURE(n, count, r);
        if (r >= 2 * rem || r % 2 == 1) exchanges = sent - (r < 2 * rem ? count : 0);
        if (r < 2 * rem && r % 2 == 0) REQUIRE(sent == count);  // 2i: its fold-in only
        else {
          const double want = 2.0 * static_cast<double>(p - 1) / p * static_cast<double>(count);
          REQUIRE(std::abs(static_cast<double>(exchanges) - want) <= slack);
        }
      }
    }
  }
}

TEST_CASE("halving-doubling is refused for other collectives and at n = 2") {
  REQUIRE_FALSE(rr::hdSupports(2));
  for (int n : {3, 4, 8, 13}) REQUIRE(rr::hdSupports(n));
  REQUIRE_THROWS_AS(make(Collective::kAllReduce, 0, 2, 100, 8, 4, 0, rr::Algorithm::kHd), rr::Error);
  REQUIRE_THROWS_AS(make(Collective::kAllGather, 0, 4, 100, 8, 4, 0, rr::Algorithm::kHd), rr::Error);
}

TEST_CASE("recursive doubling is refused for other collectives") {
  REQUIRE_FALSE(rr::rdSupports(1));
  for (int n : {2, 3, 4, 8, 13}) REQUIRE(rr::rdSupports(n));
  REQUIRE_THROWS_AS(make(Collective::kAllGather, 0, 2, 100, 8, 4, 0, rr::Algorithm::kRd), rr::Error);
  REQUIRE_THROWS_AS(make(Collective::kReduceScatter, 0, 4, 100, 8, 4, 0, rr::Algorithm::kRd), rr::Error);
}

TEST_CASE("auto's thresholds: recursive doubling up to 64 KiB at 2 ranks, 16 KiB at 3, 32 KiB from 4 on one host, 8 KiB at 3 and 16 KiB from 4 across hosts, then halving-doubling to 16 MiB at 4, 2 MiB at 8, ...") {
  using rr::Span;
  rr::JobFacts c;
  REQUIRE(c.algo == "auto");
  // The choice for job `c` on `span` (where every link pulls: `pulled`).
  const auto choose = [&c](Collective kind, size_t bytes, bool device, Span span, bool pulled = false) {
    rr::JobFacts job = c;
    job.span = span;
    job.pulledFrames = pulled;
    return rr::algorithmFor(job, kind, bytes, device);
  };
  struct Limit {
    int n;
    size_t oneHost, hosts;
  };
  const std::vector<Limit> limits = {{2, 64 << 10, 64 << 10}, {3, 16 << 10, 8 << 10},  {4, 32 << 10, 16 << 10},
                                     {6, 32 << 10, 16 << 10}, {8, 32 << 10, 16 << 10}, {128, 32 << 10, 16 << 10}};
  for (const auto& [n, oneHost, hosts] : limits) {
    for (Span span : {Span::kOneHost, Span::kHosts}) {
      const size_t limit = span == Span::kOneHost ? oneHost : hosts;
      CAPTURE(n, span == Span::kOneHost);
      c.size = n;
      REQUIRE(choose(Collective::kAllReduce, limit, false, span) == rr::Algorithm::kRd);
      REQUIRE(choose(Collective::kBarrier, 1, false, span) == rr::Algorithm::kRd);
      // Above: halving-doubling up to 16 MiB at 4 ranks and 2 MiB at 8, 128 (n a power of
      // two from 4), else the ring.
      const bool hd = n >= 4 && (n & (n - 1)) == 0;
      const size_t hdLimit = n == 4 ? size_t{16} << 20 : size_t{2} << 20;
      REQUIRE(choose(Collective::kAllReduce, limit + 1, false, span) == (hd ? rr::Algorithm::kHd : rr::Algorithm::kRing));
      REQUIRE(choose(Collective::kAllReduce, hdLimit, false, span) == (hd ? rr::Algorithm::kHd : rr::Algorithm::kRing));
      REQUIRE(choose(Collective::kAllReduce, hdLimit + 1, false, span) == rr::Algorithm::kRing);
      // Where every link reads its peers' frames: the ring from 1 MiB at 4 ranks; 8 and
      // more as before.
      const size_t pulledLimit = n == 4 ? size_t{1} << 20 : hdLimit;
      REQUIRE(choose(Collective::kAllReduce, limit, false, span, true) == rr::Algorithm::kRd);
      REQUIRE(choose(Collective::kAllReduce, pulledLimit, false, span, true) == (hd ? rr::Algorithm::kHd : rr::Algorithm::kRing));
      REQUIRE(choose(Collective::kAllReduce, pulledLimit + 1, false, span, true) == rr::Algorithm::kRing);
      REQUIRE(choose(Collective::kAllGather, 8, false, span) == rr::Algorithm::kRing);
      // Device buckets take the ring at n > 2 (the device pass has no partner links).
      REQUIRE(choose(Collective::kAllReduce, 8, true, span) == (n == 2 ? rr::Algorithm::kRd : rr::Algorithm::kRing));
      // At n = 2 recursive doubling runs on the pair's own link up to 16 KiB of a host
      // bucket; above, and for a device bucket, on the ring's links.
      const size_t pairMax = size_t{16} << 10;
      REQUIRE(rr::pairLinkFor(n, rr::Algorithm::kRd, pairMax, false) == (n == 2));
      REQUIRE_FALSE(rr::pairLinkFor(n, rr::Algorithm::kRd, pairMax + 1, false));
      REQUIRE_FALSE(rr::pairLinkFor(n, rr::Algorithm::kRd, 8, true));
      REQUIRE_FALSE(rr::pairLinkFor(n, rr::Algorithm::kRing, 8, false));
    }
  }
  // RR_ALGO overrides the span too.
  for (Span span : {Span::kOneHost, Span::kHosts}) {
    c.size = 4;
    c.algo = "rd";
    REQUIRE(choose(Collective::kAllReduce, size_t{1} << 30, false, span) == rr::Algorithm::kRd);
    c.algo = "hd";
    REQUIRE(choose(Collective::kAllReduce, 8, false, span) == rr::Algorithm::kHd);
    REQUIRE(choose(Collective::kAllReduce, 8, true, span) == rr::Algorithm::kRing);  // a device bucket
    c.size = 2;
    REQUIRE(choose(Collective::kAllReduce, 8, false, span) == rr::Algorithm::kRing);  // the same exchanges at n = 2
    c.size = 4;
    c.algo = "ring";
    REQUIRE(choose(Collective::kAllReduce, 8, false, span) == rr::Algorithm::kRing);
  }
}
