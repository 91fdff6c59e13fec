// rpc_roundtrip_bench: what one worker call costs beyond the worker's own work, between two
// processes on this host: gRPC unary calls (grpc.health.v1 Check, a few bytes each way) with
// the server and channel settings the services could use, the step socket the workers serve
// beside a unix:// address (common/rpc/step_socket_*; with both ends sleeping until each frame
// and with both polling around it as the services do by default), and a bare pipe ping-pong
// between the same two CPUs (the two wake-ups any round trip needs).
//
// Each transport runs twice: with an idle server, and with a server that first reads
// --server_read_mb of memory per call, as a decode step streams its weights (the read's own
// time is subtracted). The second round is what a router sees: after a forward of several
// milliseconds the threads that carry the answer have slept, and the caches are cold.
// Prints p50 / p90 / p99 in microseconds, and how the wall time splits into the request's way
// to the handler and the answer's way back (both processes read one monotonic clock).
//
//   rpc_roundtrip_bench [--calls 2000] [--server_cpu 1] [--client_cpu 0] [--server_read_mb 128]
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/rpc/spin_window.h"
#include "common/rpc/step_socket_client.h"
#include "common/rpc/step_socket_server.h"
#include "grpc/health/v1/health.grpc.pb.h"

ABSL_FLAG(int, calls, 2000, "timed calls per transport with an idle server (a fifth of them when it reads memory)");
ABSL_FLAG(int, server_cpu, 1, "CPU the server process is pinned to (-1: not pinned)");
ABSL_FLAG(int, client_cpu, 0, "CPU the client is pinned to (-1: not pinned)");
ABSL_FLAG(int, server_read_mb, 128, "MB the server reads before each answer in the second round (0: no second round)");
ABSL_FLAG(std::string, socket_dir, "/tmp", "directory for the Unix sockets");

namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

void PinTo(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Stands in for a worker's forward: reads `bytes` of memory once (nothing when 0). Returns
// "entered,work_us,left" (microseconds of the monotonic clock), which the answer carries back.
class ServerWork {
 public:
  explicit ServerWork(size_t bytes) : data_(bytes / sizeof(uint64_t), 1) {}
  std::string Run() {
    const int64_t entered = NowUs();
    uint64_t sum = 0;
    for (uint64_t x : data_) sum += x;
    sink_ += sum;
    const int64_t left = NowUs();
    return absl::StrCat(entered, ",", left - entered, ",", left);
  }

 private:
  std::vector<uint64_t> data_;
  uint64_t sink_ = 0;
};

class SyncHealth final : public grpc::health::v1::Health::Service {
 public:
  explicit SyncHealth(ServerWork* work) : work_(work) {}
  grpc::Status Check(grpc::ServerContext* context, const HealthCheckRequest*, HealthCheckResponse* response) override {
    context->AddTrailingMetadata("timing", work_->Run());
    response->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }

 private:
  ServerWork* work_;
};

class CallbackHealth final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit CallbackHealth(ServerWork* work) : work_(work) {}
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context, const HealthCheckRequest*,
                                  HealthCheckResponse* response) override {
    context->AddTrailingMetadata("timing", work_->Run());
    response->set_status(HealthCheckResponse::SERVING);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  ServerWork* work_;
};

enum class Transport { kGrpcSync, kGrpcCallback, kStepSocket };

struct Config {
  std::string name;
  Transport transport;
  bool minimal_stack = false;
  // Step socket only: both ends poll around the expected frame (common/rpc/spin_window.h).
  absl::Duration spin_margin = absl::ZeroDuration();
};

struct Sample {
  double excess_us, request_leg_us, answer_leg_us;
};

// Runs in a child process until killed.
[[noreturn]] void Serve(const Config& config, size_t work_bytes, const std::string& address) {
  PinTo(absl::GetFlag(FLAGS_server_cpu));
  ServerWork work(work_bytes);
  if (config.transport == Transport::kStepSocket) {
    auto server = splitspec::rpc::StepSocketServer::Start(
        address, [&work](splitspec::rpc::StepMethod, const std::string&,
                         std::function<void()>*) -> absl::StatusOr<std::string> {
          return work.Run();
        },
        /*max_connections=*/16, config.spin_margin);
    if (!server.ok()) _exit(2);
    pause();
    _exit(0);
  }
  SyncHealth sync_service(&work);
  CallbackHealth callback_service(&work);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  if (config.minimal_stack) builder.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
  if (config.transport == Transport::kGrpcSync) {
    builder.RegisterService(&sync_service);
  } else {
    builder.RegisterService(&callback_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) _exit(2);
  server->Wait();
  _exit(0);
}

Sample FromTiming(int64_t start, int64_t end, const std::string& timing) {
  std::vector<std::string> parts = absl::StrSplit(timing, ',');
  int64_t entered = 0, work = 0, left = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &entered) || !absl::SimpleAtoi(parts[1], &work) ||
      !absl::SimpleAtoi(parts[2], &left)) {
    std::fprintf(stderr, "bad timing from the server: %s\n", timing.c_str());
    std::exit(1);
  }
  return {static_cast<double>(end - start - work), static_cast<double>(entered - start),
          static_cast<double>(end - left)};
}

// One call, timed: the client's wall time less the server's work, and its two legs.
using TimedCall = std::function<Sample()>;

TimedCall GrpcCaller(const Config& config, const std::string& address) {
  grpc::ChannelArguments args;
  if (config.minimal_stack) args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  return [stub = std::shared_ptr<grpc::health::v1::Health::Stub>(std::move(stub))] {
    HealthCheckRequest request;
    HealthCheckResponse response;
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const int64_t start = NowUs();
    const grpc::Status status = stub->Check(&context, request, &response);
    const int64_t end = NowUs();
    if (!status.ok()) {
      std::fprintf(stderr, "call failed: %s\n", status.error_message().c_str());
      std::exit(1);
    }
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto it = trailers.find("timing");
    return FromTiming(start, end, it == trailers.end() ? "" : std::string(it->second.data(), it->second.size()));
  };
}

TimedCall StepSocketCaller(const std::string& path, absl::Duration spin_margin) {
  auto client = std::make_shared<splitspec::rpc::StepSocketClient>(path, spin_margin);
  return [client] {
    absl::StatusOr<std::string> answer;
    int64_t start = 0, end = 0;
    // The server may still be binding: nothing sent yet means try again.
    for (bool sent = false; !sent;) {
      start = NowUs();
      answer = client->Call(splitspec::rpc::StepMethod::kVerify, "ping", absl::Seconds(10), &sent);
      end = NowUs();
      if (!sent) usleep(10000);
    }
    if (!answer.ok()) {
      std::fprintf(stderr, "call failed: %s\n", std::string(answer.status().message()).c_str());
      std::exit(1);
    }
    return FromTiming(start, end, *answer);
  };
}

void Report(const std::string& name, std::vector<Sample> samples) {
  auto line = [&](const char* what, double Sample::*field) {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.*field);
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]; };
    std::printf("  %-44s %-14s p50 %7.1f us  p90 %7.1f us  p99 %7.1f us\n", what == nullptr ? name.c_str() : "",
                what == nullptr ? "wall - work" : what, at(0.5), at(0.9), at(0.99));
  };
  line(nullptr, &Sample::excess_us);
  line("request leg", &Sample::request_leg_us);
  line("answer leg", &Sample::answer_leg_us);
  std::fflush(stdout);
}

// A one-byte ping-pong over two pipes between the same two CPUs.
void PipePingPong(int calls) {
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) std::exit(1);
  const pid_t child = fork();
  if (child == 0) {
    PinTo(absl::GetFlag(FLAGS_server_cpu));
    close(to_child[1]);  // so that the parent's close ends the loop below
    close(to_parent[0]);
    char c;
    while (read(to_child[0], &c, 1) == 1) {
      if (write(to_parent[1], &c, 1) != 1) break;
    }
    _exit(0);
  }
  close(to_child[0]);
  close(to_parent[1]);
  std::vector<Sample> samples;
  char c = 'x';
  for (int i = -300; i < calls; ++i) {
    const int64_t start = NowUs();
    if (write(to_child[1], &c, 1) != 1 || read(to_parent[0], &c, 1) != 1) std::exit(1);
    const double us = static_cast<double>(NowUs() - start);
    if (i >= 0) samples.push_back({us, us / 2, us / 2});
  }
  close(to_child[1]);
  close(to_parent[0]);
  waitpid(child, nullptr, 0);
  std::printf("  %-44s %-14s", "pipe ping-pong (1 byte each way)", "wall");
  std::vector<double> v;
  for (const Sample& s : samples) v.push_back(s.excess_us);
  std::sort(v.begin(), v.end());
  std::printf(" p50 %7.1f us  p90 %7.1f us  p99 %7.1f us\n", v[v.size() / 2], v[v.size() * 9 / 10],
              v[v.size() * 99 / 100]);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Round-trip cost of a worker call between two processes on this host: gRPC variants, the "
      "step socket and a pipe, with an idle server and after the server reads memory.");
  absl::ParseCommandLine(argc, argv);
  const int calls = absl::GetFlag(FLAGS_calls);
  PinTo(absl::GetFlag(FLAGS_client_cpu));
  std::printf("client CPU %d, server CPU %d\n", absl::GetFlag(FLAGS_client_cpu), absl::GetFlag(FLAGS_server_cpu));
  std::fflush(stdout);  // before the forks below, which would copy an unflushed buffer
  PipePingPong(calls);

  const std::vector<Config> configs = {
      {"grpc sync server (the services)", Transport::kGrpcSync},
      {"grpc sync server, minimal stack", Transport::kGrpcSync, true},
      {"grpc callback server", Transport::kGrpcCallback},
      {"grpc callback server, minimal stack", Transport::kGrpcCallback, true},
      {"step socket, sleeping until each frame", Transport::kStepSocket},
      {absl::StrCat("step socket, polling +-", splitspec::rpc::kDefaultStepSpinMicros, " us (the default)"),
       Transport::kStepSocket, false, absl::Microseconds(splitspec::rpc::kDefaultStepSpinMicros)},
  };
  const std::string socket_base = absl::StrCat(absl::GetFlag(FLAGS_socket_dir), "/splitspec-rpc-roundtrip-", getpid());
  const size_t read_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_server_read_mb)) << 20;
  for (const size_t work_bytes : {size_t{0}, read_bytes}) {
    if (work_bytes == 0) {
      std::printf("idle server, %d calls each:\n", calls);
    } else {
      if (read_bytes == 0) break;
      std::printf("server reads %zu MB before each answer (its time subtracted), %d calls each:\n", work_bytes >> 20,
                  calls / 5);
    }
    std::fflush(stdout);
    for (const Config& config : configs) {
      const bool step = config.transport == Transport::kStepSocket;
      const std::string path = socket_base + (step ? ".step" : ".sock");
      unlink(path.c_str());
      const std::string address = step ? path : "unix://" + path;
      const pid_t server = fork();
      if (server == 0) Serve(config, work_bytes, address);
      // The parent never starts gRPC (its threads would not survive a fork): server and client
      // of each configuration are fresh processes.
      const pid_t client = fork();
      if (client == 0) {
        TimedCall call = step ? StepSocketCaller(path, config.spin_margin) : GrpcCaller(config, address);
        const int n = work_bytes > 0 ? calls / 5 : calls;
        std::vector<Sample> samples;
        for (int i = -std::min(300, n / 5); i < n; ++i) {
          const Sample s = call();
          if (i >= 0) samples.push_back(s);
        }
        Report(config.name, samples);
        _exit(0);
      }
      waitpid(client, nullptr, 0);
      kill(server, SIGTERM);
      waitpid(server, nullptr, 0);
      unlink(path.c_str());
    }
  }
  return 0;
}
