#include "tests/reference/model_variants.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/engine/model/safetensors.h"
#include "tests/reference/reference_runner.h"

namespace splitspec::reference {
namespace fs = std::filesystem;

absl::Status MakeTinyModel(const std::string& cli, const std::string& out_dir, const std::string& dtype,
                           int seed, const std::string& extra_flags) {
  auto out = RunCommand(absl::StrCat("'", cli, "' make-model --preset tiny --out '", out_dir, "' --dtype ", dtype,
                                     " --seed ", seed, " ", extra_flags));
  return out.status();
}

absl::Status ReadConfig(const std::string& dir, nlohmann::json* config) {
  std::ifstream f(dir + "/config.json");
  if (!f) return absl::NotFoundError(absl::StrCat(dir, "/config.json: cannot open"));
  std::stringstream text;
  text << f.rdbuf();
  *config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config->is_discarded()) return absl::InvalidArgumentError(absl::StrCat(dir, "/config.json: bad JSON"));
  return absl::OkStatus();
}

absl::Status DeriveModel(const std::string& src_dir, const std::string& dst_dir, const Derivation& d) {
  std::error_code ec;
  fs::create_directories(dst_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", dst_dir, ": ", ec.message()));

  nlohmann::json config;
  if (absl::Status s = ReadConfig(src_dir, &config); !s.ok()) return s;
  config.merge_patch(d.config_patch);
  {
    std::ofstream f(dst_dir + "/config.json");
    f << config.dump(2) << "\n";
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", dst_dir, "/config.json"));
  }
  if (fs::exists(src_dir + "/tokenizer.model")) {
    fs::copy_file(src_dir + "/tokenizer.model", dst_dir + "/tokenizer.model",
                  fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat("copy tokenizer.model: ", ec.message()));
  }

  auto archive = engine::SafetensorsArchive::OpenDirectory(src_dir);
  if (!archive.ok()) return archive.status();
  const int n_shards = std::max(1, d.n_shards);
  std::vector<engine::SafetensorsWriter> writers(n_shards);
  std::vector<std::string> shard_names(n_shards, "model.safetensors");
  if (n_shards > 1) {
    for (int i = 0; i < n_shards; ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", i + 1, n_shards);
      shard_names[i] = name;
    }
  }
  nlohmann::json weight_map = nlohmann::json::object();
  int next = 0;
  auto add = [&](std::string name, engine::DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    weight_map[name] = shard_names[next];
    writers[next].Add(std::move(name), dtype, std::move(shape), std::move(bytes));
    next = (next + 1) % n_shards;
  };
  for (const std::string& name : (*archive)->TensorNames()) {
    if (std::find(d.drop_tensors.begin(), d.drop_tensors.end(), name) != d.drop_tensors.end()) continue;
    auto view = (*archive)->Get(name);
    if (!view.ok()) return view.status();
    add(name, view->dtype, view->shape, std::vector<uint8_t>(view->data, view->data + view->n_bytes));
  }
  std::mt19937 rng(d.seed);
  std::normal_distribution<float> normal(0.0f, d.add_stddev);
  for (const Derivation::NewTensor& t : d.add_tensors) {
    int64_t n = 1;
    for (int64_t dim : t.shape) n *= dim;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
    }
    add(t.name, engine::DType::kF32, t.shape, std::move(bytes));
  }
  for (int i = 0; i < n_shards; ++i) {
    if (absl::Status s = writers[i].WriteFile(dst_dir + "/" + shard_names[i]); !s.ok()) return s;
  }
  if (n_shards > 1) {
    std::ofstream f(dst_dir + "/model.safetensors.index.json");
    f << nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", weight_map}}.dump(2) << "\n";
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", dst_dir, "/model.safetensors.index.json"));
  }
  return absl::OkStatus();
}

}  // namespace splitspec::reference
