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
#include "common/engine/model/quantize.h"
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
  // Without --dtype the tensors keep the target's bytes.
  std::optional<engine::DType> dtype;
  if (args.Has("dtype")) {
    const absl::StatusOr<engine::DType> parsed = engine::ParseDTypeName(args.GetString("dtype"));
    if (!parsed.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(parsed.status().message()).c_str());
      return 2;
    }
    dtype = *parsed;
  }
  args.CheckAllUsed();
  std::fprintf(stderr, "make-model: draft of %s with %lld layers%s%s -> %s\n", target.c_str(), n_layers,
               dtype.has_value() ? " in " : "", dtype.has_value() ? std::string(engine::DTypeName(*dtype)).c_str() : "",
               out.c_str());
  const absl::Status status =
      engine::MakeDraftModel(target, static_cast<int>(n_layers), out, PrintProgress, dtype);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(status.ToString()).c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

// The weights --quantize int8 serves, written out as an F32 model (see WriteInt8RoundTripModel).
int MakeInt8RoundTrip(const Args& args) {
  const std::string source = args.Require("int8-of");
  const std::string out = args.Require("out");
  args.CheckAllUsed();
  if (const absl::Status status = engine::WriteInt8RoundTripModel(source, out); !status.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(status.ToString()).c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

int Run(const Args& args) {
  if (args.Has("draft-of")) return MakeDraft(args);
  if (args.Has("int8-of")) return MakeInt8RoundTrip(args);
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
  options.seed = args.GetUint64("seed", 0);
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
    "make-model", "write a random Llama model directory, a layer-truncated draft, or an int8 round trip",
    "  --out DIR                 directory to write (required)\n"
    "  --preset tiny|small|medium|large  model size (tiny)\n"
    "  --dtype f32|f16|bf16      weight dtype (f32; with --draft-of: the target's unless given,\n"
    "                            so --layers equal to the target's converts a model)\n"
    "  --seed S                  weight seed (0)\n"
    "  --tie-embeddings [BOOL]   share the embedding and output matrices (preset's choice)\n"
    "  --attention-bias [BOOL]   q/k/v projection biases (preset's choice)\n"
    "  --rope-llama3 [BOOL]      Llama 3 RoPE scaling (preset's choice)\n"
    "  --corpus FILE             text to train the tokenizer on (default: the bundled corpus)\n"
    "  --hf-tokenizer DIR        instead of training one: copy DIR's tokenizer.json and\n"
    "                            tokenizer_config.json (vocabulary sized to that tokenizer)\n"
    "  --draft-of DIR            instead: copy DIR's first --layers N layers into a draft model\n"
    "  --layers N                layers of the draft (with --draft-of)\n"
    "  --int8-of DIR             instead: write DIR's weights as --quantize int8 serves them (F32;\n"
    "                            the engine also rounds activations to int8)\n",
    Run);

}  // namespace
}  // namespace splitspec::tools
