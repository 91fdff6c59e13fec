// `splitspec generate-remote` (and `splitspec generate --router ADDR`, which dispatches here):
// streams a generation from a running router and prints one summary line at the end.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "common/rpc/worker_clients.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tools/command.h"

namespace splitspec::tools {
namespace {

const char* FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_STOP: return "stop";
    case v1::FINISH_REASON_EOS: return "eos";
    default: return "unspecified";
  }
}

int RunGenerateRemote(const Args& args) {
  const std::string router = args.Require("router");
  const std::string prompt = args.Require("prompt");
  v1::GenerateRequest request;
  request.set_text(prompt);
  request.set_max_tokens(static_cast<int32_t>(args.GetInt("max-tokens", 64)));
  if (args.Has("stop")) request.add_stop(args.GetString("stop"));
  request.set_ignore_eos(args.Has("ignore-eos"));
  request.set_drafter(args.GetString("drafter"));
  request.mutable_sampling()->set_temperature(static_cast<float>(args.GetDouble("temperature", 0.0)));
  request.mutable_sampling()->set_top_k(static_cast<int32_t>(args.GetInt("top-k", 0)));
  request.mutable_sampling()->set_top_p(static_cast<float>(args.GetDouble("top-p", 1.0)));
  // Unset: the router picks a fresh seed and reports it in the final message.
  if (args.Has("seed")) request.mutable_sampling()->set_seed(args.GetUint64("seed", 0));
  const bool quiet = args.Has("quiet");
  args.CheckAllUsed();

  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  const auto start = std::chrono::steady_clock::now();
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  v1::GenerateResponse last;
  while (reader->Read(&response)) {
    if (!quiet) {
      std::fwrite(response.text().data(), 1, response.text().size(), stdout);
      std::fflush(stdout);
    }
    last = response;
  }
  const grpc::Status status = reader->Finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) std::printf("\n");
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s (%d)\n", status.error_message().c_str(), static_cast<int>(status.error_code()));
    return 1;
  }
  const v1::Usage& usage = last.usage();
  const double per_step = usage.steps() > 0 ? static_cast<double>(usage.completion_tokens()) / usage.steps() : 0.0;
  const std::string seed = last.has_seed() ? ", seed " + std::to_string(last.seed()) : std::string();
  std::printf("[%d tokens, %d steps, mean accept length %.2f (%d/%d drafts accepted), %.1f tokens/s, finish %s%s]\n",
              usage.completion_tokens(), usage.steps(), per_step, usage.accepted_tokens(), usage.drafted_tokens(),
              seconds > 0 ? usage.completion_tokens() / seconds : 0.0, FinishName(last.finish_reason()), seed.c_str());
  return 0;
}

RegisterCommand kRegister(
    "generate-remote", "stream a generation from a running router and print a summary line",
    "  --router ADDR             the router's address (required)\n"
    "  --prompt TEXT             the prompt (required)\n"
    "  --max-tokens N            tokens to generate at most (64)\n"
    "  --stop S                  end before this string\n"
    "  --ignore-eos              keep generating past the end-of-sequence token\n"
    "  --drafter POOL            drafter pool to ask for (default: the router chooses)\n"
    "  --temperature T           0 = greedy (0)\n"
    "  --top-k K                 0 = no top-k cut (0)\n"
    "  --top-p P                 1 = no nucleus cut (1)\n"
    "  --seed S                  sampling seed (unset: the router picks one and reports it)\n"
    "  --quiet                   print only the summary line\n",
    RunGenerateRemote);

}  // namespace
}  // namespace splitspec::tools
