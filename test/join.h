// The start of every check program: a communicator from the environment (RR_RANK, RR_SIZE,
// RR_ADDR, ...), with this rank and the job's size. A failed init prints why to stderr and
// exits with status 1.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "ringreduce/ringreduce.h"

namespace rr::test {

struct Member {
  rr_comm_t comm = nullptr;
  int rank = 0;
  int size = 0;
};

inline Member joinFromEnv() {
  Member m;
  if (rr_comm_init_from_env(&m.comm) != RR_SUCCESS) {
    std::fprintf(stderr, "init: %s\n", rr_last_error());
    std::exit(1);
  }
  rr_comm_rank(m.comm, &m.rank);
  rr_comm_size(m.comm, &m.size);
  return m;
}

}  // namespace rr::test
