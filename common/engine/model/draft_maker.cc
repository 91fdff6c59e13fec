// MakeDraftModel: validate the target against its config, copy the kept tensors (converted when
// another dtype is asked for), rewrite the config's layer count, copy the tokenizer.
#include "common/engine/model/draft_maker.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/engine/model/llama_tensors.h"
#include "common/engine/model/safetensors.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

absl::Status CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", from));
  std::ofstream out(to, std::ios::binary);
  out << in.rdbuf();
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", to));
  return absl::OkStatus();
}

// The target's config.json with num_hidden_layers (and torch_dtype, given `dtype`) replaced;
// other keys (even ones we do not parse) are kept so the draft stays loadable wherever the
// target is.
absl::Status WriteDraftConfig(const std::string& target_config, int n_layers, std::optional<DType> dtype,
                              const std::string& out_dir) {
  std::ifstream in(target_config, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(target_config, ": not a JSON object"));
  }
  json["num_hidden_layers"] = n_layers;
  if (dtype.has_value()) json["torch_dtype"] = TorchDTypeName(*dtype);
  const std::string path = out_dir + "/config.json";
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDraftModel(const std::string& target_dir, int n_layers, const std::string& out_dir,
                            const MakeProgress& progress, std::optional<DType> dtype) {
  const std::string target_config = target_dir + "/config.json";
  absl::StatusOr<ModelConfig> config = LoadModelConfig(target_config);
  if (!config.ok()) return config.status();
  if (n_layers < 1 || n_layers > config->n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("--layers ", n_layers, " must be in [1, ",
                                                   config->n_layers, "] (the target's layers)"));
  }
  absl::StatusOr<std::unique_ptr<SafetensorsArchive>> archive =
      SafetensorsArchive::OpenDirectory(target_dir);
  if (!archive.ok()) return archive.status();

  ModelConfig draft = *config;
  draft.n_layers = n_layers;
  const std::vector<TensorSpec> specs = LlamaTensorSpecs(draft);
  SafetensorsWriter writer;
  int done = 0;
  for (const TensorSpec& spec : specs) {
    absl::StatusOr<TensorView> view = (*archive)->GetWithShape(spec.name, spec.shape);
    if (!view.ok()) return view.status();
    const DType stored = dtype.value_or(view->dtype);
    writer.Add(spec.name, stored, spec.shape, TensorBytesAs(*view, stored));
    if (progress) progress(++done, static_cast<int>(specs.size()), spec.name);
  }
  absl::Status status = EnsureDirectory(out_dir);
  if (status.ok()) status = WriteDraftConfig(target_config, n_layers, dtype, out_dir);
  if (status.ok()) status = writer.WriteFile(out_dir + "/model.safetensors");
  if (status.ok()) status = CopyFile(target_dir + "/tokenizer.model", out_dir + "/tokenizer.model");
  return status;
}

}  // namespace splitspec::engine
