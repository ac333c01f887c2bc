// The C API's answers to bad input: the matching code, a message naming the problem, and
// no crash. A single-rank communicator needs no network.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "ringreduce/ringreduce.h"

namespace {

rr_comm_t single() {
  rr_config_t cfg = RR_CONFIG_INIT;
  cfg.rank = 0;
  cfg.size = 1;
  rr_comm_t comm = nullptr;
  REQUIRE(rr_comm_init(&cfg, &comm) == RR_SUCCESS);
  REQUIRE(comm != nullptr);
  return comm;
}

bool says(const char* needle) { return std::string(rr_last_error()).find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("version and result strings") {
  REQUIRE(rr_version() == RR_VERSION_CODE);
  REQUIRE(std::string(rr_result_string(RR_ERR_MISMATCH)).find("mismatch") != std::string::npos);
  REQUIRE(std::string(rr_result_string(static_cast<rr_result_t>(99))) == "unknown result code");
}

TEST_CASE("init rejects bad configurations") {
  rr_comm_t comm = reinterpret_cast<rr_comm_t>(0x1);
  REQUIRE(rr_comm_init(nullptr, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(comm == nullptr);
  REQUIRE(rr_comm_init_from_env(nullptr) == RR_ERR_INVALID_ARGUMENT);

  rr_config_t cfg = RR_CONFIG_INIT;
  cfg.rank = 4;
  cfg.size = 4;
  cfg.addr = "127.0.0.1:1";
  REQUIRE(rr_comm_init(&cfg, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("rank 4 is out of range for size 4"));

  cfg.rank = 0;
  cfg.size = 0;
  REQUIRE(rr_comm_init(&cfg, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("size 0"));

  cfg.size = 2;
  cfg.addr = "no-port-here";
  REQUIRE(rr_comm_init(&cfg, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("no-port-here"));

  cfg.struct_size = 1;
  REQUIRE(rr_comm_init(&cfg, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("struct_size"));
}

TEST_CASE("collectives reject bad arguments and stay usable") {
  rr_comm_t comm = single();
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  REQUIRE(rr_allreduce(nullptr, x, y, 4, RR_FLOAT32, RR_SUM, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("comm is NULL"));
  REQUIRE(rr_allreduce(comm, nullptr, y, 4, RR_FLOAT32, RR_SUM, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("NULL"));
  REQUIRE(rr_allreduce(comm, x, nullptr, 4, RR_FLOAT32, RR_SUM, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(rr_allreduce(comm, x, y, 4, static_cast<rr_dtype_t>(42), RR_SUM, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("unknown dtype 42"));
  REQUIRE(rr_allreduce(comm, x, y, 4, RR_FLOAT32, static_cast<rr_op_t>(-1), nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("unknown reduction op -1"));
  REQUIRE(rr_allreduce(comm, x, y, SIZE_MAX / 2, RR_FLOAT64, RR_SUM, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("overflows"));
  REQUIRE(rr_allgather(comm, x, y, SIZE_MAX / 8, RR_INT64, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(rr_broadcast(comm, x, 4, RR_FLOAT32, 1, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("root 1 is out of range"));
  REQUIRE(rr_allreduce(comm, x, x + 1, 2, RR_FLOAT32, RR_SUM, nullptr) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("overlap"));
  REQUIRE(rr_comm_rank(comm, nullptr) == RR_ERR_INVALID_ARGUMENT);

  // still usable, and a single rank's reduction is a copy
  REQUIRE(rr_allreduce(comm, x, y, 4, RR_FLOAT32, RR_AVG, nullptr) == RR_SUCCESS);
  REQUIRE(y[3] == 4.0f);
  REQUIRE(rr_allreduce(comm, nullptr, nullptr, 0, RR_FLOAT32, RR_SUM, nullptr) == RR_SUCCESS);
  REQUIRE(rr_barrier(comm) == RR_SUCCESS);
  int rank = -1, size = -1;
  REQUIRE(rr_comm_rank(comm, &rank) == RR_SUCCESS);
  REQUIRE(rr_comm_size(comm, &size) == RR_SUCCESS);
  REQUIRE((rank == 0 && size == 1));
  REQUIRE(rr_comm_destroy(comm) == RR_SUCCESS);
  REQUIRE(rr_comm_destroy(nullptr) == RR_SUCCESS);
}

TEST_CASE("a stream with host buffers: ordered where CUDA works, else CUDA's own error") {
  rr_comm_t comm = single();
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  // (void*)1 is cudaStreamLegacy, a stream handle that is valid wherever CUDA works.
  void* legacy = reinterpret_cast<void*>(1);
  const rr_result_t rc = rr_allreduce(comm, x, y, 4, RR_FLOAT32, RR_SUM, legacy);
  if (!rr::cudaBuilt()) {
    REQUIRE(rc == RR_ERR_UNSUPPORTED);
    REQUIRE(says("no CUDA support"));
  } else if (rc == RR_ERR_CUDA) {  // no driver or no GPU: CUDA's message, and the call's name
    INFO(rr_last_error());
    REQUIRE(says("allreduce on rank 0: cudaStreamGetDevice: "));
    REQUIRE(says("(cuda"));  // CUDA's error name, e.g. (cudaErrorInsufficientDriver)
  } else {
    REQUIRE(rc == RR_SUCCESS);
    REQUIRE(y[3] == 4.0f);
  }
  // a failed submission leaves the communicator usable
  REQUIRE(rr_allreduce(comm, x, y, 4, RR_FLOAT32, RR_MAX, nullptr) == RR_SUCCESS);
  REQUIRE(y[2] == 3.0f);
  REQUIRE(rr_comm_destroy(comm) == RR_SUCCESS);
}

namespace {

// Sets an environment variable for a scope.
struct Env {
  std::string name;
  Env(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~Env() { unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("a half-set launcher environment is an error naming the missing variable") {
  rr_comm_t comm = nullptr;
  {
    Env rank("RR_RANK", "1"), addr("RR_ADDR", "127.0.0.1:29999");
    REQUIRE(rr_comm_init_from_env(&comm) == RR_ERR_INVALID_ARGUMENT);
    INFO(rr_last_error());
    REQUIRE(says("RR_RANK=1 is set but RR_SIZE is not"));
  }
  {
    Env size("RR_SIZE", "4");
    REQUIRE(rr_comm_init_from_env(&comm) == RR_ERR_INVALID_ARGUMENT);
    REQUIRE(says("RR_SIZE=4 is set but RR_RANK is not"));
  }
  {
    Env stray("RANK", "3");
    REQUIRE(rr_comm_init_from_env(&comm) == RR_ERR_INVALID_ARGUMENT);
    REQUIRE(says("RANK=3 is set but WORLD_SIZE is not"));
  }
  {
    Env slurm("SLURM_PROCID", "0");
    REQUIRE(rr_comm_init_from_env(&comm) == RR_ERR_INVALID_ARGUMENT);
    REQUIRE(says("SLURM_NTASKS"));
  }
  REQUIRE(comm == nullptr);
}

TEST_CASE("RR_ADDR with port 0 is refused for more than one rank") {
  rr_config_t cfg = RR_CONFIG_INIT;
  cfg.rank = 0;
  cfg.size = 2;
  cfg.addr = "127.0.0.1:0";
  rr_comm_t comm = nullptr;
  REQUIRE(rr_comm_init(&cfg, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("needs a port in 1..65535"));
}

TEST_CASE("a destroyed communicator or freed request is named, never a crash") {
  rr_comm_t comm = single();
  float x = 1;
  rr_request_t req = nullptr;
  REQUIRE(rr_allreduce_async(comm, &x, &x, 1, RR_FLOAT32, RR_SUM, nullptr, &req) == RR_SUCCESS);
  REQUIRE(rr_wait(req) == RR_SUCCESS);
  REQUIRE(rr_request_free(req) == RR_SUCCESS);
  REQUIRE(rr_request_free(req) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("not a live request"));
  REQUIRE(rr_wait(req) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(rr_comm_destroy(comm) == RR_SUCCESS);
  REQUIRE(rr_comm_destroy(comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("not a live communicator"));
  int rank = -1;
  REQUIRE(rr_comm_rank(comm, &rank) == RR_ERR_INVALID_ARGUMENT);
}

TEST_CASE("rr_config_t is read only as far as struct_size covers") {
  // A caller built against a header that ended after `size`: the rest is not read.
  struct Old {
    size_t struct_size;
    int rank;
    int size;
  } old{sizeof(Old), 0, 1};
  std::vector<unsigned char> mem(sizeof(rr_config_t), 0xff);  // garbage after the old fields
  std::memcpy(mem.data(), &old, sizeof old);
  rr_comm_t comm = nullptr;
  REQUIRE(rr_comm_init(reinterpret_cast<const rr_config_t*>(mem.data()), &comm) == RR_SUCCESS);
  REQUIRE(rr_comm_destroy(comm) == RR_SUCCESS);
  rr_config_t tiny = RR_CONFIG_INIT;
  tiny.struct_size = 4;
  REQUIRE(rr_comm_init(&tiny, &comm) == RR_ERR_INVALID_ARGUMENT);
  REQUIRE(says("struct_size 4 is too small"));
}

TEST_CASE("RR_TIMELINE: two communicators of one job in one process write two valid files") {
  char dir[] = "/tmp/rr-timeline-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/trace.json";
  Env timeline("RR_TIMELINE", path.c_str());
  rr_comm_t a = single(), b = single();
  float x = 1;
  REQUIRE(rr_allreduce(a, &x, &x, 1, RR_FLOAT32, RR_SUM, nullptr) == RR_SUCCESS);
  REQUIRE(rr_allreduce(b, &x, &x, 1, RR_FLOAT32, RR_SUM, nullptr) == RR_SUCCESS);
  REQUIRE(rr_comm_destroy(a) == RR_SUCCESS);
  REQUIRE(rr_comm_destroy(b) == RR_SUCCESS);
  std::vector<std::string> files;
  for (const char* suffix : {".0.json", ".0.2.json"}) {
    const std::string glob = std::string("ls ") + dir + "/trace.*" + suffix + " > " + dir + "/list 2>/dev/null";
    REQUIRE(std::system(glob.c_str()) == 0);
    std::FILE* l = std::fopen((std::string(dir) + "/list").c_str(), "r");
    char name[512] = {};
    REQUIRE(std::fgets(name, sizeof name, l) != nullptr);
    std::fclose(l);
    std::string f(name);
    f.erase(f.find_last_not_of('\n') + 1);
    std::FILE* t = std::fopen(f.c_str(), "r");
    REQUIRE(t != nullptr);
    std::string text;
    for (int ch; (ch = std::fgetc(t)) != EOF;) text += static_cast<char>(ch);
    std::fclose(t);
    INFO(f << ": " << text.substr(0, 200));
    REQUIRE(text.front() == '[');
    REQUIRE(text.find("allreduce #1") != std::string::npos);
    REQUIRE(text[text.find_last_not_of(" \n")] == ']');
    files.push_back(f);
  }
  REQUIRE(files[0] != files[1]);
  REQUIRE(std::system((std::string("rm -rf ") + dir).c_str()) == 0);
}
