// Processes on loopback for the integration tests (see cluster.h).
#include "tests/integration/cluster.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {

std::unique_ptr<Process> Process::Start(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::abort();
  }
  // Built before fork: the child may only make async-signal-safe calls before exec.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // A test binary that dies (crash, timeout) takes its services with it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv(args[0], args.data());
    std::perror("execv");
    _exit(127);
  }
  close(fds[1]);
  // The first line: "<name> listening on HOST:PORT (...)".
  std::string line;
  char c;
  while (read(fds[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  auto process = std::unique_ptr<Process>(new Process());
  process->pid_ = pid;
  process->stdout_fd_ = fds[0];  // kept open so later prints cannot hit a closed pipe
  const std::string marker = "listening on ";
  const size_t at = line.find(marker);
  if (at == std::string::npos) {
    std::fprintf(stderr, "process %s did not start: '%s'\n", absl::StrJoin(argv, " ").c_str(), line.c_str());
    std::abort();
  }
  const size_t begin = at + marker.size();
  process->address_ = line.substr(begin, line.find(' ', begin) - begin);
  return process;
}

Process::~Process() { Stop(); }

std::string Process::ReadLine() {
  std::string line;
  char c;
  while (stdout_fd_ >= 0 && read(stdout_fd_, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

int Process::Stop() { return Kill(SIGTERM); }

int Process::Kill(int signal) {
  if (pid_ < 0) return -1;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  close(stdout_fd_);
  return status;
}

std::string ReadMetricsAddress(Process& process) {
  const std::string line = process.ReadLine();
  const std::string marker = "metrics on ";
  const size_t at = line.find(marker);
  if (at == std::string::npos) {
    std::fprintf(stderr, "expected a 'metrics on HOST:PORT' line, got '%s'\n", line.c_str());
    std::abort();
  }
  const size_t begin = at + marker.size();
  return line.substr(begin, line.find(' ', begin) - begin);
}

namespace {
Cluster* g_cluster = nullptr;
}  // namespace

Cluster& Cluster::Get() {
  if (g_cluster == nullptr) g_cluster = new Cluster();
  return *g_cluster;
}

Cluster* Cluster::GetIfStarted() { return g_cluster; }

Cluster::Cluster() {
  const TestModels& models = GetTestModels();
  // Metrics on free ports too (the defaults 9400-9402 would clash between processes and runs).
  verifier_ = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--expose-model-path", "--port", "0",
                              "--max-draft-tokens", "16", "--kv-blocks", "2048", "--threads", "1",
                              "--metrics-port", "0"});
  model_drafter_ = Process::Start({SPLITSPEC_DRAFTER_BIN, "--model", models.draft_dir, "--port", "0",
                                   "--max-draft-tokens", "8", "--kv-blocks", "2048", "--threads", "1",
                                   "--metrics-port", "0"});
  ngram_drafter_ = Process::Start({SPLITSPEC_DRAFTER_BIN, "--ngram", "--ngram-min", "1", "--ngram-max", "3",
                                   "--port", "0", "--max-draft-tokens", "8", "--metrics-port", "0"});
  verifier_metrics_ = ReadMetricsAddress(*verifier_);
  model_drafter_metrics_ = ReadMetricsAddress(*model_drafter_);
  ngram_drafter_metrics_ = ReadMetricsAddress(*ngram_drafter_);
}

const std::string& Cluster::Router(const std::string& policy, const std::vector<std::string>& extra) {
  const std::string key = policy + " " + absl::StrJoin(extra, " ");
  auto it = routers_.find(key);
  if (it == routers_.end()) {
    std::vector<std::string> flags = {"--drafter", "model=" + model_drafter(), "--drafter", "ngram=" + ngram_drafter(),
                                      "--policy", policy};
    flags.insert(flags.end(), extra.begin(), extra.end());
    it = routers_.emplace(key, StartRouter(flags)).first;
  }
  return it->second->address();
}

std::unique_ptr<Process> Cluster::StartRouter(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {SPLITSPEC_ROUTER_BIN, "--verifier", verifier(), "--port", "0",
                                   "--metrics-port", "0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return Process::Start(argv);
}

std::map<std::string, int> Cluster::StopAll() {
  std::map<std::string, int> statuses;
  // Routers first: they drain their requests while the workers are still up.
  for (auto& [key, router] : routers_) statuses["router " + key] = router->Stop();
  statuses["drafter (model)"] = model_drafter_->Stop();
  statuses["drafter (ngram)"] = ngram_drafter_->Stop();
  statuses["verifier"] = verifier_->Stop();
  routers_.clear();
  return statuses;
}


namespace {

// Stops whatever a test binary started when its tests are done.
class ClusterEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (Cluster* cluster = Cluster::GetIfStarted()) cluster->StopAll();
  }
};
::testing::Environment* const kClusterEnvironment = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

}  // namespace
}  // namespace splitspec::testing
