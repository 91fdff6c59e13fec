// `splitspec generate`: plain generation on the local engine (--model, on --device cpu|cuda[:N]),
// or through a running router (--router, handled by the `generate-remote` command when the
// services are built).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/engine/backend.h"
#include "common/engine/generation/generate.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/sampling/seed.h"
#include "common/engine/cuda/select_backend.h"
#include "common/engine/tokenizer/load_tokenizer.h"
#include "common/engine/tokenizer/tokenizer.h"
#include "router/service/text_stream.h"
#include "tools/command.h"
#include "tools/engine_device.h"

namespace splitspec::tools {
namespace {

using engine::GenerateOptions;

int RunGenerate(const Args& args) {
  if (args.Has("router")) {
    auto remote = CommandRegistry().find("generate-remote");
    if (remote == CommandRegistry().end()) {
      std::fprintf(stderr, "error: this build has no gRPC client; use --model DIR\n");
      return 2;
    }
    return remote->second.run(args);
  }
  const std::string model_dir = args.Require("model");
  const std::string prompt = args.Require("prompt");
  GenerateOptions options;
  options.max_tokens = static_cast<int>(args.GetIntInRange("max-tokens", 64, 1, 1 << 20));
  options.sampling.temperature = static_cast<float>(args.GetDouble("temperature", 0.0));
  options.sampling.top_k = static_cast<int>(args.GetInt("top-k", 0));
  options.sampling.top_p = static_cast<float>(args.GetDouble("top-p", 1.0));
  // Unset: a fresh seed, printed with the summary so the run can be repeated.
  options.sampling.seed = engine::ChooseSeed(args.Has("seed") ? std::optional<uint64_t>(args.GetUint64("seed", 0))
                                                              : std::nullopt);
  const int threads = static_cast<int>(args.GetIntInRange("threads", 0, 0, 4096));
  const engine::DeviceSpec device = DeviceFlagOrExit(args);
  engine::ModelLoadOptions load_options;
  load_options.quantize = QuantizeFlagOrExit(args);
  const engine::DType kv_dtype = KvDTypeFlagOrExit(args);
  args.CheckAllUsed();

  auto tokenizer = engine::LoadTokenizer(model_dir);  // tokenizer.json, else tokenizer.model
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<engine::Backend> backend = CreateBackendOrExit(device, threads);
  auto model = engine::LlamaModel::Load(model_dir, *backend, load_options);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const std::vector<int32_t> prompt_tokens = (*tokenizer)->Encode(prompt, /*add_bos=*/true);
  const int block_size = 16;
  // The sequence never outgrows the model's context (GenerateTokens stops there).
  const int64_t max_length = std::min<int64_t>(static_cast<int64_t>(prompt_tokens.size()) + options.max_tokens,
                                               (*model)->config().max_position_embeddings);
  const int n_blocks = static_cast<int>(max_length / block_size + 2);
  auto kv = (*model)->CreateKvCache(n_blocks, block_size, kv_dtype);
  if (!kv.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(kv.status().message()).c_str());
    return 1;
  }
  options.eos_id = (*tokenizer)->eos_id();
  // The prompt is the text's context, as in the router: the first token's leading space stays.
  router::TextStream text(tokenizer->get(), prompt_tokens, /*stop=*/{});
  size_t n_generated = 0;
  auto first_token_time = std::chrono::steady_clock::now();
  options.on_token = [&](int32_t token) {
    if (n_generated++ == 0) first_token_time = std::chrono::steady_clock::now();
    std::fputs(text.Add({token}).c_str(), stdout);
    std::fflush(stdout);
    return true;
  };
  std::fputs(prompt.c_str(), stdout);
  const auto start = std::chrono::steady_clock::now();
  auto result = engine::GenerateTokens(**model, **kv, prompt_tokens, options);
  const auto end = std::chrono::steady_clock::now();
  std::fputs(text.Flush().c_str(), stdout);
  // The CUDA backend reports op failures only through its status.
  const absl::Status status = result.ok() ? engine::BackendStatus(*backend) : result.status();
  if (!status.ok()) {
    std::fprintf(stderr, "\nerror: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  const double total = std::chrono::duration<double>(end - start).count();
  const double decode = std::chrono::duration<double>(end - first_token_time).count();
  const size_t n = result->size();
  const std::string seed = options.sampling.greedy()
                               ? std::string()
                               : ", seed " + std::to_string(options.sampling.seed);
  // Neither max_tokens nor eos: GenerateTokens stopped at the model's context.
  const bool context_full = static_cast<int>(n) < options.max_tokens && (n == 0 || result->back() != options.eos_id);
  const std::string stop =
      context_full ? "; stopped: the model's context of " + std::to_string((*model)->config().max_position_embeddings) +
                         " positions is full"
                   : std::string();
  std::fprintf(stderr,
               "\n[%zu prompt tokens, %zu generated in %.3f s: prefill+first token %.1f ms, decode %.1f tokens/s%s%s]\n",
               prompt_tokens.size(), n, total, (total - decode) * 1e3, n > 1 ? (n - 1) / decode : 0.0, seed.c_str(),
               stop.c_str());
  return 0;
}

const RegisterCommand kRegister(
    "generate", "generate text from a prompt on a local model (--model DIR) or through a router (--router ADDR)",
    "  --model DIR               generate locally with this model directory\n"
    "  --router ADDR             generate through a running router instead (see generate-remote)\n"
    "  --prompt TEXT             the prompt (required)\n"
    "  --max-tokens N            tokens to generate at most (64; generation also stops when\n"
    "                            the model's context, max_position_embeddings, is full)\n"
    "  --temperature T           0 = greedy (0)\n"
    "  --top-k K                 0 = no top-k cut (0)\n"
    "  --top-p P                 1 = no nucleus cut (1)\n"
    "  --seed S                  sampling seed (unset: a fresh one, printed at the end)\n"
    "  --device cpu|cuda|cuda:N  where the model runs (cpu; --model only)\n"
    "  --threads N               CPU threads (0 = all cores; --model only)\n"
    "  --quantize none|int8      int8: quantize the matrices at load (Q8_0; --model only) (none)\n"
    "  --kv-dtype f32|f16        how the KV cache stores K and V (f16: CPU only; --model only) (f32)\n",
    RunGenerate);

}  // namespace
}  // namespace splitspec::tools
