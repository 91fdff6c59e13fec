// MakeDraftModel: validate the target against its config, copy the kept tensors (converted when
// another dtype is asked for), rewrite the config's layer count, copy the tokenizer.
#include "common/engine/model/draft_maker.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/engine/dtype.h"
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

// Element i of an F32, F16 or BF16 tensor, exactly (every F16 and BF16 value is an F32 one).
float ReadElement(const TensorView& view, int64_t i) {
  switch (view.dtype) {
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, view.data + 2 * i, sizeof h);
      return F16ToF32(h);
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, view.data + 2 * i, sizeof b);
      return BF16ToF32(b);
    }
    default: {
      float f;
      std::memcpy(&f, view.data + 4 * i, sizeof f);
      return f;
    }
  }
}

// The tensor's bytes in `dtype`: as they are when it already is, else each value through F32.
absl::StatusOr<std::vector<uint8_t>> BytesIn(const TensorView& view, DType dtype) {
  if (view.dtype == dtype) return std::vector<uint8_t>(view.data, view.data + view.n_bytes);
  if (view.dtype == DType::kQ8_0 || dtype == DType::kQ8_0) {
    return absl::InvalidArgumentError(absl::StrCat(view.name, ": only F32, F16 and BF16 convert"));
  }
  const int64_t n = view.n_elements();
  std::vector<uint8_t> out(static_cast<size_t>(n) * DTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float f = ReadElement(view, i);
    if (dtype == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &f, sizeof f);
    } else {
      const uint16_t h = dtype == DType::kF16 ? F32ToF16(f) : F32ToBF16(f);
      std::memcpy(out.data() + 2 * i, &h, sizeof h);
    }
  }
  return out;
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
    absl::StatusOr<std::vector<uint8_t>> bytes = BytesIn(*view, stored);
    if (!bytes.ok()) return bytes.status();
    writer.Add(spec.name, stored, spec.shape, *std::move(bytes));
    if (progress) progress(++done, static_cast<int>(specs.size()), spec.name);
  }
  absl::Status status = EnsureDirectory(out_dir);
  if (status.ok()) status = WriteDraftConfig(target_config, n_layers, dtype, out_dir);
  if (status.ok()) status = writer.WriteFile(out_dir + "/model.safetensors");
  if (status.ok()) status = CopyFile(target_dir + "/tokenizer.model", out_dir + "/tokenizer.model");
  return status;
}

}  // namespace splitspec::engine
