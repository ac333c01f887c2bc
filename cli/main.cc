// The `ringreduce` command: bench, run, info.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/bench.h"
#include "cli/info.h"
#include "cli/launcher.h"
#include "kernels/dtype.h"

namespace {

// Options that ask for local ranks are dropped before the command is run as a rank.
std::vector<std::string> rankArgs(int argc, char** argv) {
  std::vector<std::string> out{"/proc/self/exe"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-N" || a == "--ranks") {
      ++i;
      continue;
    }
    if (a.rfind("--ranks=", 0) == 0 || (a.rfind("-N", 0) == 0 && a.size() > 2)) continue;
    out.push_back(a);
  }
  return out;
}

// `ringreduce run -n N [--] PROGRAM ARGS...`, parsed by hand so that everything from the
// program on is passed through untouched, options that look like ours included.
int runCommand(int argc, char** argv) {
  int ranks = 0;
  std::string bindTo = "none";
  int i = 2;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--bind-to" && i + 1 < argc) {
      bindTo = argv[++i];
      continue;
    }
    if (a.rfind("--bind-to=", 0) == 0) {
      bindTo = a.substr(10);
      continue;
    }
    if ((a == "-n" || a == "--np") && i + 1 < argc) {
      a = argv[++i];
    } else if (a.rfind("-n", 0) == 0 && a.size() > 2 && a[2] != '-') {
      a = a.substr(2);
    } else if (a.rfind("--np=", 0) == 0) {
      a = a.substr(5);
    } else if (a == "--") {
      ++i;
      break;
    } else if (a.size() > 1 && a[0] == '-' && a != "-h" && a != "--help") {
      std::fprintf(stderr, "ringreduce run: unknown option '%s' (usage: ringreduce run -n N [--bind-to core|none|auto] [--] PROGRAM ARGS...)\n",
                   a.c_str());
      return 2;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: ringreduce run -n N [--bind-to core|none|auto] [--] PROGRAM ARGS...\n"
                  "Starts N ranks of PROGRAM on this host with RR_RANK, RR_SIZE, RR_ADDR and a\n"
                  "fresh RR_SECRET; prefixes their output with [rank]; stops them all when one\n"
                  "fails and exits with its status. --bind-to core: rank r runs on the r-th CPU\n"
                  "allowed (auto: so for 1 or 2 ranks, as mpirun; default none).\n");
      return 0;
    } else {
      break;
    }
    char* end = nullptr;
    long v = std::strtol(a.c_str(), &end, 10);
    if (a.empty() || *end != '\0' || v < 1 || v > 1024) {
      std::fprintf(stderr, "ringreduce run: -n needs a number of ranks in 1..1024, got '%s'\n", a.c_str());
      return 2;
    }
    ranks = static_cast<int>(v);
  }
  if (ranks == 0 || i >= argc) {
    std::fprintf(stderr, "usage: ringreduce run -n N [--bind-to core|none|auto] [--] PROGRAM ARGS...\n");
    return 2;
  }
  rr::cli::Bind bind;
  if (std::string error; !rr::cli::parseBind(bindTo, ranks, bind, error)) {
    std::fprintf(stderr, "ringreduce run: %s\n", error.c_str());
    return 2;
  }
  return rr::cli::launch({ranks, std::vector<std::string>(argv + i, argv + argc), true, bind});
}

}  // namespace

// What the bench subcommand took as words, checked in benchCommand.
struct BenchWords {
  std::string minBytes, maxBytes, dtype, op, bindTo;
};

// `ringreduce bench` once its flags are parsed: checks them (a usage error exits 2 before
// any rank starts), then runs this rank of a launcher's job or starts -N local ranks.
int benchCommand(int argc, char** argv, rr::cli::BenchOptions& bench, const BenchWords& w, int check, int ranks,
                 bool ranksGiven, bool benchNamed) {
  const std::string& minBytes = w.minBytes;
  const std::string& maxBytes = w.maxBytes;
  const std::string& dtype = w.dtype;
  const std::string& op = w.op;
  const std::string& bindTo = w.bindTo;
  for (auto [flag, text, out] : {std::tuple{"-b/--minbytes", &minBytes, &bench.minBytes},
                                  std::tuple{"-e/--maxbytes", &maxBytes, &bench.maxBytes}}) {
    try {
      *out = rr::cli::parseSize(*text);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ringreduce bench: %s: %s\n", flag, e.what());
      return 2;
    }
  }
  if (bench.minBytes > bench.maxBytes) {
    std::fprintf(stderr, "ringreduce bench: --minbytes %zu is larger than --maxbytes %zu\n",
                 bench.minBytes, bench.maxBytes);
    return 2;
  }
  auto d = rr::parseDtype(dtype);
  auto o = rr::parseOp(op);
  if (!d || !o) {
    std::fprintf(stderr, "ringreduce bench: unknown %s '%s'\n", d ? "op" : "dtype",
                 d ? op.c_str() : dtype.c_str());
    return 2;
  }
  bench.dtype = *d;
  bench.op = *o;
  bench.check = check != 0;
  // -N given explicitly starts local ranks even where launcher variables are set (a stray
  // RANK in a shell); without it, launcher variables make this process one rank of a job.
  const bool local = ranksGiven || !rr::cli::startedByLauncher();
  const uint64_t need = static_cast<uint64_t>(rr::cli::benchBytesPerRank(bench)) * (local ? static_cast<uint64_t>(ranks) : 1);
  if (const uint64_t have = rr::cli::availableMemory(); have > 0 && need > have) {
    std::fprintf(stderr,
                 "ringreduce bench: -e/--maxbytes %s needs about %.1f GiB (%d rank%s x %s buffers of "
                 "that size), but this host has %.1f GiB available; use a smaller -e%s\n",
                 maxBytes.c_str(), static_cast<double>(need) / (1 << 30), local ? ranks : 1,
                 local && ranks > 1 ? "s" : "", bench.check ? "5" : "2",
                 static_cast<double>(have) / (1 << 30), bench.check ? " or -c 0" : "");
    return 2;
  }
  // A broadcast root that no rank has is a usage error before any rank starts.
  if (bench.collective == "broadcast" && bench.root < 0) {
    std::fprintf(stderr, "ringreduce bench: -r/--root %d is not a rank (ranks are 0..size-1)\n", bench.root);
    return 2;
  }
  if (bench.collective == "broadcast" && local && bench.root >= ranks) {
    std::fprintf(stderr, "ringreduce bench: -r/--root %d is not one of the %d rank%s started here (-N %d; valid: 0..%d)\n",
                 bench.root, ranks, ranks == 1 ? "" : "s", ranks, ranks - 1);
    return 2;
  }
  if (!local) return rr::cli::runBench(bench);
  rr::cli::Bind bind;
  if (std::string error; !rr::cli::parseBind(bindTo, ranks, bind, error)) {
    std::fprintf(stderr, "ringreduce bench: %s\n", error.c_str());
    return 2;
  }
  std::vector<std::string> args = rankArgs(argc, argv);
  if (!benchNamed) args.push_back("bench");
  return rr::cli::launch({ranks, args, false, bind});
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "run") return runCommand(argc, argv);
  CLI::App app{"ringreduce: ring all-reduce engine (bench, run, info)"};
  app.require_subcommand(0, 1);

  rr::cli::BenchOptions bench;
  std::string minBytes = "1K", maxBytes = "64M", dtype = "float", op = "sum";
  int ranks = 4;
  int check = 1;
  auto* b = app.add_subcommand("bench", "ring benchmark in the style of nccl-tests all_reduce_perf");
  b->add_option("-b,--minbytes", minBytes, "smallest size, e.g. 1K")->capture_default_str();
  b->add_option("-e,--maxbytes", maxBytes, "largest size, e.g. 256M")->capture_default_str();
  b->add_option("-f,--stepfactor", bench.stepFactor, "multiply the size by this each step")
      ->capture_default_str()->check(CLI::Range(1.0001, 1e9));
  b->add_option("-n,--iters", bench.iters, "timed iterations per size")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  b->add_option("-w,--warmup", bench.warmup, "untimed iterations per size")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  b->add_option("-d,--dtype", dtype, "float, double, half, bfloat16, int8, uint8, int32, uint32, int64, uint64")->capture_default_str();
  b->add_option("-o,--op", op, "sum, prod, min, max, avg")->capture_default_str();
  b->add_option("-c,--check", check, "check results (1) or not (0)")->capture_default_str()->check(CLI::Range(0, 1));
  b->add_option("-N,--ranks", ranks, "local ranks to start when no launcher started this one")
      ->capture_default_str()->check(CLI::Range(1, 256));
  b->add_option("-r,--root", bench.root, "broadcast root")->capture_default_str();
  b->add_option("--collective", bench.collective, "allreduce, broadcast, allgather, reduce_scatter")
      ->capture_default_str()->check(CLI::IsMember({"allreduce", "broadcast", "allgather", "reduce_scatter"}));
  b->add_flag("--device", bench.device,
              "buffers in GPU memory (GPU = local rank modulo the GPU count); results are "
              "checked after copying them back");
  b->add_option("--format", bench.format, "table or json")->capture_default_str()->check(CLI::IsMember({"table", "json"}));
  std::string bindTo = "auto";
  b->add_option("--bind-to", bindTo,
                "with -N: core (rank r on the r-th CPU allowed), none, or auto: core for 1 or 2 "
                "ranks, as mpirun binds by default")
      ->capture_default_str()->check(CLI::IsMember({"auto", "core", "none"}));

  app.add_subcommand("run", "start N ranks of a program on this host: run -n N [--] PROGRAM ARGS...");

  auto* info = app.add_subcommand("info", "version, build options, CPU features, CUDA devices");
  bool settings = false, testHooks = false;
  info->add_flag("--settings", settings, "print the table of RR_* settings (Markdown), as the README has it");
  info->add_flag("--test-hooks", testHooks, "print the table of test-only RR_TEST_* hooks (Markdown)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as the command's own do.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (*info) return settings || testHooks ? rr::cli::printSettings(testHooks) : rr::cli::runInfo();
  // bench, also when no subcommand is given
  return benchCommand(argc, argv, bench, BenchWords{minBytes, maxBytes, dtype, op, bindTo}, check, ranks,
                      b->count("-N") > 0, b->parsed());
}
