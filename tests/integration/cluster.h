// Real splitspec processes on loopback for the integration tests: a verifier, a draft-model
// drafter and an n-gram drafter on tiny test models, and routers started on demand with a
// given policy. Every process listens on a port it picks itself (--port 0) and reports it on
// its first stdout line, which the test reads (a pipe read: no polling, no port races).
#ifndef SPLITSPEC_TESTS_INTEGRATION_CLUSTER_H_
#define SPLITSPEC_TESTS_INTEGRATION_CLUSTER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace splitspec::testing {

// A child process; SIGTERM on Stop (or destruction), which must end it with exit code 0.
class Process {
 public:
  // Starts `argv` and blocks until it printed its "... listening on HOST:PORT ..." line.
  static std::unique_ptr<Process> Start(const std::vector<std::string>& argv);
  ~Process();
  const std::string& address() const { return address_; }
  // The next line the process prints on stdout (without the newline); blocks until it comes,
  // "" at end of output. E.g. "<name> metrics on HOST:PORT" right after the listening line.
  std::string ReadLine();
  // SIGTERM and wait; returns the exit status as waitpid reports it (-1 if already stopped).
  int Stop();
  // Sends `signal` (SIGKILL for a crash) and waits for the exit; the status as Stop's.
  int Kill(int signal);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string address_;
};

// Reads a process's "<name> metrics on HOST:PORT" line (the one after its listening line) and
// returns HOST:PORT; aborts when the line is something else.
std::string ReadMetricsAddress(Process& process);

// Not thread-safe: set up from the test thread.
class Cluster {
 public:
  static Cluster& Get();  // started on first use, stopped by StopAll (or after the tests)
  static Cluster* GetIfStarted();

  const std::string& verifier() const { return verifier_->address(); }
  const std::string& model_drafter() const { return model_drafter_->address(); }
  const std::string& ngram_drafter() const { return ngram_drafter_->address(); }
  // The workers' metrics HTTP addresses (HOST:PORT serving /metrics).
  const std::string& verifier_metrics() const { return verifier_metrics_; }
  const std::string& model_drafter_metrics() const { return model_drafter_metrics_; }
  const std::string& ngram_drafter_metrics() const { return ngram_drafter_metrics_; }
  // A router over the verifier and both drafters (pools "model" and "ngram"), one per
  // distinct (policy, extra flags).
  const std::string& Router(const std::string& policy, const std::vector<std::string>& extra = {});
  // A router with extra flags only (e.g. a drafter that is down); never cached.
  std::unique_ptr<Process> StartRouter(const std::vector<std::string>& flags);

  // Stops every process; returns the exit statuses by name (0 = drained and exited cleanly),
  // -1 for those already stopped.
  std::map<std::string, int> StopAll();

 private:
  Cluster();
  std::unique_ptr<Process> verifier_, model_drafter_, ngram_drafter_;
  std::string verifier_metrics_, model_drafter_metrics_, ngram_drafter_metrics_;
  std::map<std::string, std::unique_ptr<Process>> routers_;
};

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_CLUSTER_H_
