// `--device`, `--tp` and `--kv-dtype` on the real binaries (splitspec-verifier, splitspec-drafter and the
// engine-running `splitspec` subcommands): --device cpu serves and generates end to end (the
// verifier also with --tp 2, ranks as threads, checked against plain greedy decoding over
// gRPC), an unknown device is a usage error, and cuda without the CUDA backend or without a GPU
// exits 2 with the reason instead of crashing. Also the subcommands' numbers out of range, and
// the model's context, refused with the flag named.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/engine/cuda/select_backend.h"
#include "common/rpc/worker_clients.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec {
namespace {

using testing::GetTestModels;
using testing::GreedyReference;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunCommand(const std::vector<std::string>& argv) {
  std::string command;
  for (const std::string& a : argv) command += "'" + a + "' ";
  CommandResult result;
  FILE* pipe = popen((command + "2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A service on --port 0: started, its "listening on HOST:PORT" line read (a blocking pipe
// read, no polling), stopped with SIGTERM.
class Service {
 public:
  explicit Service(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // a test binary that dies takes the service with it
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    close(fds[0]);
    first_line_ = line;
    const std::string marker = "listening on ";
    const size_t at = line.find(marker);
    if (at != std::string::npos) {
      const size_t begin = at + marker.size();
      address_ = line.substr(begin, line.find(' ', begin) - begin);
    }
  }
  ~Service() { Stop(); }
  // Empty when the service did not start.
  const std::string& address() const { return address_; }
  const std::string& first_line() const { return first_line_; }
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
  std::string first_line_;
};

std::vector<std::string> VerifierArgs(const std::string& device,
                                      std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {SPLITSPEC_VERIFIER_BIN,
                                   "--model",
                                   GetTestModels().target_dir,
                                   "--device",
                                   device,
                                   "--port",
                                   "0",
                                   "--metrics-port",
                                   "-1",
                                   "--threads",
                                   "1",
                                   "--kv-blocks",
                                   "64",
                                   "--drain-seconds",
                                   "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}
std::vector<std::string> DrafterArgs(const std::string& device) {
  return {SPLITSPEC_DRAFTER_BIN,
          "--model",
          GetTestModels().draft_dir,
          "--device",
          device,
          "--port",
          "0",
          "--metrics-port",
          "-1",
          "--threads",
          "1",
          "--kv-blocks",
          "64",
          "--drain-seconds",
          "1"};
}
std::vector<std::string> GenerateArgs(const std::string& device) {
  return {SPLITSPEC_CLI_BIN, "generate",    "--model",      GetTestModels().target_dir,
          "--prompt",        "def main():", "--max-tokens", "6",
          "--threads",       "1",           "--device",     device};
}
std::vector<std::string> BenchEngineArgs(const std::string& device) {
  return {
      SPLITSPEC_CLI_BIN, "bench-engine", "--model", GetTestModels().target_dir, "--threads", "1",
      "--device",        device};
}

// Every engine-running command line, for a device.
std::vector<std::vector<std::string>> AllCommands(const std::string& device) {
  return {VerifierArgs(device), DrafterArgs(device), GenerateArgs(device), BenchEngineArgs(device)};
}

TEST(DeviceFlagTest, UnknownDeviceIsAUsageError) {
  for (const std::string device : {"bogus", "cuda:x", "cuda:-1", "gpu"}) {
    for (const std::vector<std::string>& argv : AllCommands(device)) {
      const CommandResult r = RunCommand(argv);
      EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(argv, " ") << "\n" << r.output;
      const bool named =
          r.output.find("unknown device '" + device + "'") != std::string::npos ||
          r.output.find("bad CUDA device index in '" + device + "'") != std::string::npos;
      EXPECT_TRUE(named) << absl::StrJoin(argv, " ") << "\n" << r.output;
    }
  }
}

// bench-engine says how much of the process lies in huge-page chunks and huge pages, times
// decode of the same weights held in huge-page chunks and in base pages, steps alternating in
// one process, and breaks a batch-1 step down by the kind of op and its matmuls by weight
// shape (3 steps: 2 differences), once for the steps paired with read passes and once for steps
// back to back.
TEST(DeviceFlagTest, BenchEngineComparesBasePagesOnTheCpu) {
  std::vector<std::string> argv = BenchEngineArgs("cpu");
  for (const char* extra : {"--compare-base-pages", "--steps", "3", "--batches", "1", "--forward-tokens", "1"}) {
    argv.push_back(extra);
  }
  const CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("host memory: batch-1 decode "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" MB of buffers in huge-page chunks ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(transparent huge pages: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" ms with the C allocator's base pages (medians of 3 steps each, alternating)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("paired breakdown: 2 more paired steps, each op timed around its call"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("% of it, the matmuls' reads "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step breakdown: 2 batch-1 decode steps, each op timed around its call"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" MB of weights read at "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("matmuls by weight shape (rows x columns: calls a step, median time a call, median read "
                          "rate): "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" GB/s; "), std::string::npos) << r.output;  // more than one shape
}

// The message CheckDevice gives is what every binary prints, with exit code 2.
TEST(DeviceFlagTest, CudaWithoutTheBackendOrAGpuFailsCleanly) {
  for (const std::string device : {"cuda", "cuda:0", "cuda:7"}) {
    const absl::Status expected = engine::CheckDevice(device);
    if (expected.ok()) continue;  // that GPU exists here: covered by the CUDA tests
    if (engine::CudaBackendCompiled()) {
      EXPECT_EQ(expected.code(), absl::StatusCode::kUnavailable) << expected;
    } else {
      EXPECT_EQ(expected.code(), absl::StatusCode::kUnimplemented) << expected;
    }
    for (const std::vector<std::string>& argv : AllCommands(device)) {
      const CommandResult r = RunCommand(argv);
      EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(argv, " ") << "\n" << r.output;
      EXPECT_NE(r.output.find(std::string(expected.message())), std::string::npos)
          << absl::StrJoin(argv, " ") << "\n"
          << r.output;
      EXPECT_EQ(r.output.find("Segmentation"), std::string::npos) << r.output;
    }
  }
  if (engine::CheckDevice("cuda:0").ok()) {
    GTEST_SKIP() << "a GPU is present: cuda:0 does not fail here (cuda:7 was checked if absent)";
  }
}

TEST(DeviceFlagTest, TensorParallelFlagsAreCheckedBeforeLoading) {
  struct Case {
    std::vector<std::string> extra;
    std::string device;
    int exit_code;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{"--tp", "0"}, "cpu", 2, "--tp must be in [1, 1024], got 0"},
      {{"--step-spin-us", "-1"}, "cpu", 2, "--step-spin-us must be 0 to 100000"},
      {{"--tp", "2", "--tp-rank", "0", "--tp-id-file", "/nonexistent/id"},
       "cpu",
       2,
       "use --device cuda"},
      {{"--tp", "2", "--tp-rank", "2", "--tp-id-file", "/nonexistent/id"},
       "cpu",
       2,
       "--tp-rank 2 outside [0, 2)"},
      {{"--tp", "2", "--tp-rank", "1"}, "cpu", 2, "--tp-rank needs --tp-leader-port P on rank 0"},
      {{"--tp", "2", "--tp-rank", "1", "--tp-leader-port", "50060"}, "cpu", 2, "--tp-leader-port is rank 0's"},
      {{"--tp", "2", "--tp-rank", "0", "--tp-leader", "verifier-0.verifier:50060"},
       "cpu",
       2,
       "rank 0 is the leader"},
      {{"--tp", "2", "--tp-rank", "1", "--tp-leader", "verifier-0.verifier"}, "cpu", 2, "is not HOST:PORT"},
      {{"--tp", "2", "--tp-rank", "1", "--tp-leader", "h:1", "--tp-id-file", "/nonexistent/id"},
       "cpu",
       2,
       "use one"},
      {{"--tp", "2", "--tp-rank", "1", "--tp-leader", "h:1", "--tp-heartbeat-seconds", "0"},
       "cpu",
       2,
       "--tp-heartbeat-seconds must be > 0"},
      {{"--tp", "2", "--tp-leader", "h:1"}, "cpu", 2, "--tp-leader and --tp-leader-port go with --tp-rank"},
      {{"--tp", "2", "--tp-id-file", "/nonexistent/id"},
       "cpu",
       2,
       "--tp-id-file goes with --tp-rank"},
      // 4 attention heads do not split 3 ways: every rank fails to load, none hangs.
      {{"--tp", "3"}, "cpu", 1, "loading target model"},
  };
  for (const Case& c : cases) {
    const std::vector<std::string> argv = VerifierArgs(c.device, c.extra);
    const CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, c.exit_code) << absl::StrJoin(argv, " ") << "\n" << r.output;
    EXPECT_NE(r.output.find(c.fragment), std::string::npos) << absl::StrJoin(argv, " ") << "\n"
                                                            << r.output;
  }
}

// --check-flags validates what a GPU deployment passes (deploy/k8s/overlays/tp) on any machine:
// device names, not devices, and nothing is loaded (the model directory need not exist).
TEST(DeviceFlagTest, CheckFlagsValidatesWithoutLoadingOrADevice) {
  const std::vector<std::string> leader = {SPLITSPEC_VERIFIER_BIN, "--model", "/nonexistent/model", "--device",
                                           "cuda:0", "--tp", "4", "--tp-rank", "0", "--tp-leader-port", "50060",
                                           "--host", "0.0.0.0", "--check-flags"};
  CommandResult r = RunCommand(leader);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("flags ok"), std::string::npos) << r.output;
  const std::vector<std::string> follower = {SPLITSPEC_VERIFIER_BIN, "--model", "/nonexistent/model", "--device",
                                             "cuda:0", "--tp", "4", "--tp-rank", "3", "--tp-leader",
                                             "verifier-0.verifier:50060", "--check-flags"};
  r = RunCommand(follower);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> broken = follower;
  broken[8] = "4";  // --tp-rank 4 of 4
  r = RunCommand(broken);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tp-rank 4 outside [0, 4)"), std::string::npos) << r.output;
  broken = follower;
  broken[5] = "gpu";
  r = RunCommand(broken);
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(DeviceFlagTest, CpuGeneratesEndToEnd) {
  const CommandResult r = RunCommand(GenerateArgs("cpu"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("6 generated"), std::string::npos) << r.output;
}

// The verifier with --device cpu, alone and as a TP = 2 group (ranks as threads), over gRPC:
// prefill, a draft with a wrong tail, plain decode steps; both reproduce greedy decoding.
TEST(DeviceFlagTest, CpuVerifierServesEndToEndAlsoWithTwoRanks) {
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300};
  const std::vector<int32_t> reference = GreedyReference(GetTestModels().target_dir, prompt, 12);
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{}, {"--tp", "2"}}) {
    const std::vector<std::string> argv = VerifierArgs("cpu", extra);
    Service verifier(argv);
    ASSERT_FALSE(verifier.address().empty())
        << absl::StrJoin(argv, " ") << ": " << verifier.first_line();
    EXPECT_NE(verifier.first_line().find(extra.empty() ? "tp 1" : "tp 2"), std::string::npos)
        << verifier.first_line();
    rpc::VerifierClient client(rpc::MakeChannel(verifier.address()), absl::Seconds(120));
    auto prefilled = client.Prefill({{1, prompt, {}}});
    ASSERT_TRUE(prefilled.ok()) << prefilled.status();
    std::vector<int32_t> out = {(*prefilled)[0].next_token};
    // Two right drafts and a wrong one, then plain steps.
    spec::DraftProposal draft;
    draft.tokens = {reference[1], reference[2], (reference[3] + 1) % 512};
    draft.parents = {-1, 0, 1};
    auto verified = client.Verify({{1, draft}});
    ASSERT_TRUE(verified.ok()) << verified.status();
    EXPECT_EQ(verified->results[0].accept_length, 2);
    out.insert(out.end(), verified->results[0].tokens.begin(), verified->results[0].tokens.end());
    while (out.size() < reference.size()) {
      auto step = client.Verify({{1, {}}});
      ASSERT_TRUE(step.ok()) << step.status();
      out.push_back(step->results[0].tokens[0]);
    }
    EXPECT_EQ(out, reference) << absl::StrJoin(extra, " ");
    // A bad request is refused and the group keeps serving.
    auto refused = client.Verify({{99, {}}});
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->results[0].status.code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(client.Release({1}).ok());
    auto info = client.GetInfo();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->free_blocks, info->total_blocks);
    EXPECT_EQ(verifier.Stop(), 0) << "SIGTERM drains and exits 0 (the follower rank stops with it)";
  }
}

TEST(DeviceFlagTest, CpuDrafterServesEndToEnd) {
  Service drafter(DrafterArgs("cpu"));
  ASSERT_FALSE(drafter.address().empty()) << drafter.first_line();
  rpc::DrafterClient client(rpc::MakeChannel(drafter.address()), absl::Seconds(120));
  spec::ProposeItem item;
  item.id = 1;
  item.new_tokens = {1, 17, 42, 99};
  item.shape.depth = 3;
  auto proposed = client.Propose({item});
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  ASSERT_EQ(proposed->results.size(), 1u);
  EXPECT_EQ(proposed->results[0].draft.tokens.size(), 3u);
  EXPECT_EQ(drafter.Stop(), 0);
}

// --kv-dtype on the same four commands: an unknown value is a usage error naming it, f16 on the
// CPU generates, and the lookup drafters, which keep no KV cache, refuse the flag.
TEST(DeviceFlagTest, KvDTypeFlagIsCheckedEverywhere) {
  for (std::vector<std::string> argv : AllCommands("cpu")) {
    argv.insert(argv.end(), {"--kv-dtype", "bf16"});
    const CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(argv, " ") << "\n" << r.output;
    EXPECT_NE(r.output.find("unknown KV cache dtype 'bf16'"), std::string::npos) << absl::StrJoin(argv, " ") << "\n" << r.output;
  }
  std::vector<std::string> generate = GenerateArgs("cpu");
  generate.insert(generate.end(), {"--kv-dtype", "f16"});
  const CommandResult generated = RunCommand(generate);
  EXPECT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_NE(generated.output.find("def main():"), std::string::npos) << generated.output;
  const CommandResult ngram = RunCommand({SPLITSPEC_DRAFTER_BIN, "--ngram", "--kv-dtype", "f16", "--port", "0"});
  EXPECT_EQ(ngram.exit_code, 2) << ngram.output;
  EXPECT_NE(ngram.output.find("--kv-dtype goes with --model"), std::string::npos) << ngram.output;
}

TEST(DeviceFlagTest, NgramDrafterRefusesADevice) {
  const CommandResult r =
      RunCommand({SPLITSPEC_DRAFTER_BIN, "--ngram", "--device", "cpu", "--port", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--device goes with --model"), std::string::npos) << r.output;
}

// Numbers outside what a command can run with are usage errors naming the flag, never a crash:
// `bench-engine --steps 0` used to end in a segmentation fault, `--context -3` in an uncaught
// exception, `generate --max-tokens -5` in an empty run.
TEST(DeviceFlagTest, NumbersOutOfRangeAreUsageErrors) {
  const std::string target = GetTestModels().target_dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{SPLITSPEC_CLI_BIN, "bench-engine", "--model", target, "--steps", "0"}, "--steps must be in [1, "},
      {{SPLITSPEC_CLI_BIN, "bench-engine", "--model", target, "--context", "-3"}, "--context must be in [1, "},
      {{SPLITSPEC_CLI_BIN, "bench-engine", "--model", target, "--threads", "-1"}, "--threads must be in [0, "},
      {{SPLITSPEC_CLI_BIN, "bench-engine", "--model", target, "--context", "100000", "--batches", "1"},
       "runs past the model's context of "},
      {{SPLITSPEC_CLI_BIN, "generate", "--model", target, "--prompt", "x", "--max-tokens", "-5"},
       "--max-tokens must be in [1, "},
      {{SPLITSPEC_CLI_BIN, "generate", "--model", target, "--prompt", "x", "--max-tokens", "99999999999"},
       "--max-tokens must be in [1, "},
      {{SPLITSPEC_CLI_BIN, "generate", "--model", target, "--prompt", "x", "--seed", "-1"},
       "--seed expects an integer in [0, 2^64)"},
      {{SPLITSPEC_CLI_BIN, "generate", "--model", target, "--prompt", "x", "--seed", "18446744073709551616"},
       "--seed expects an integer in [0, 2^64)"},
      // simulate took a probability of 2 and wrapped 2^32 + 1 requests to one.
      {{SPLITSPEC_CLI_BIN, "simulate", "--policies", "none", "--rates", "1", "--phase-switch", "2"},
       "--phase-switch is a probability: it must be in [0, 1]"},
      {{SPLITSPEC_CLI_BIN, "simulate", "--policies", "none", "--rates", "1", "--requests", "4294967297"},
       "--requests must be in [1, "},
  };
  for (const auto& [argv, message] : cases) {
    const CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(argv, " ") << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << absl::StrJoin(argv, " ") << "\n" << r.output;
  }
}

// generate prints the seed it chose so that the run can be repeated, and the seed can be any
// 64-bit value: one above 2^63 is taken as given (it used to be clamped to 2^63 - 1), so two
// seeds that differ only in their top bit give their own samples.
TEST(DeviceFlagTest, GenerateTakesBackAnySeedItPrints) {
  auto sample = [](const std::string& seed) {
    return RunCommand({SPLITSPEC_CLI_BIN, "generate", "--model", GetTestModels().target_dir, "--prompt", "def f(",
                       "--max-tokens", "24", "--threads", "1", "--temperature", "1.5", "--seed", seed});
  };
  const CommandResult high = sample("18446744073709551615");
  ASSERT_EQ(high.exit_code, 0) << high.output;
  EXPECT_NE(high.output.find(", seed 18446744073709551615]"), std::string::npos) << high.output;
  EXPECT_EQ(sample("18446744073709551615").output.substr(0, high.output.find('[')),
            high.output.substr(0, high.output.find('[')));
  const CommandResult clamped = sample("9223372036854775807");
  ASSERT_EQ(clamped.exit_code, 0) << clamped.output;
  EXPECT_NE(clamped.output.substr(0, clamped.output.find('[')), high.output.substr(0, high.output.find('[')));
}

}  // namespace
}  // namespace splitspec
