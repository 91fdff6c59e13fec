// `splitspec make-model`: writes a random Llama model directory from a preset, or a
// layer-truncated draft of an existing model (--draft-of). The work is in
// common/engine/model/{model_maker,draft_maker}.cc; this file only maps flags onto it.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/engine/model/draft_maker.h"
#include "common/engine/model/model_maker.h"
#include "tools/command.h"

namespace splitspec::tools {
namespace {

using engine::MakeModelOptions;

// A self-overwriting progress line on a terminal; a line per quarter in a log.
void PrintProgress(int done, int total, const std::string& name) {
  static const bool tty = isatty(STDERR_FILENO);
  if (tty) {
    std::fprintf(stderr, "\r  [%d/%d] %-52s", done, total, name.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  } else if (done * 4 / total != (done - 1) * 4 / total) {
    std::fprintf(stderr, "  [%d/%d] %s\n", done, total, name.c_str());
  }
  std::fflush(stderr);
}

std::optional<bool> OptionalSwitch(const Args& args, const std::string& name) {
  if (!args.Has(name)) return std::nullopt;
  const std::string value = args.GetString(name);
  if (value.empty() || value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  std::fprintf(stderr, "error: --%s takes true or false, got '%s'\n", name.c_str(), value.c_str());
  std::exit(2);
}

int MakeDraft(const Args& args) {
  const std::string target = args.Require("draft-of");
  args.Require("layers");
  const long long n_layers = args.GetInt("layers", 0);
  const std::string out = args.Require("out");
  args.CheckAllUsed();
  std::fprintf(stderr, "make-model: draft of %s with %lld layers -> %s\n", target.c_str(), n_layers,
               out.c_str());
  const absl::Status status =
      engine::MakeDraftModel(target, static_cast<int>(n_layers), out, PrintProgress);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(status.ToString()).c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

int Run(const Args& args) {
  if (args.Has("draft-of")) return MakeDraft(args);
  MakeModelOptions options;
  options.preset = args.GetString("preset", "tiny");
  options.out_dir = args.Require("out");
  const absl::StatusOr<engine::DType> dtype =
      engine::ParseDTypeName(args.GetString("dtype", "f32"));
  if (!dtype.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(dtype.status().message()).c_str());
    return 2;
  }
  options.dtype = *dtype;
  options.seed = static_cast<uint64_t>(args.GetInt("seed", 0));
  options.tie_embeddings = OptionalSwitch(args, "tie-embeddings");
  options.attention_bias = OptionalSwitch(args, "attention-bias");
  options.rope_llama3 = OptionalSwitch(args, "rope-llama3");
  options.corpus = args.GetString("corpus");
  options.hf_tokenizer_dir = args.GetString("hf-tokenizer");
  options.progress = PrintProgress;
  args.CheckAllUsed();
  std::fprintf(stderr, "make-model: preset %s, %s, seed %llu -> %s\n", options.preset.c_str(),
               std::string(engine::DTypeName(options.dtype)).c_str(),
               static_cast<unsigned long long>(options.seed), options.out_dir.c_str());
  const absl::Status status = engine::MakeModel(options);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(status.ToString()).c_str());
    return 1;
  }
  std::printf("wrote %s\n", options.out_dir.c_str());
  return 0;
}

const RegisterCommand kRegister(
    "make-model",
    "write a random Llama model dir: --preset tiny|small|medium --out DIR [--dtype f32|f16|bf16] "
    "[--seed S] [--tie-embeddings] [--attention-bias] [--rope-llama3] [--corpus FILE] "
    "[--hf-tokenizer DIR (copy its tokenizer.json + tokenizer_config.json; vocab sized to it)]; or "
    "--draft-of TARGET_DIR --layers N --out DIR",
    Run);

}  // namespace
}  // namespace splitspec::tools
