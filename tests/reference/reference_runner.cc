#include "tests/reference/reference_runner.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/engine/backend.h"
#include "common/engine/model/llama_model.h"
#include "nlohmann/json.hpp"

namespace splitspec::reference {

absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen failed: ", command));
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("command failed (status ", status, "): ", command, "\n", output));
  }
  return output;
}

absl::Status CheckTorch(const std::string& python) {
  auto out = RunCommand(absl::StrCat("'", python, "' -c 'import torch, numpy'"));
  if (!out.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the reference test needs ", python, " with torch and numpy "
        "(Debian: apt-get install python3-torch python3-numpy): ", out.status().message()));
  }
  return absl::OkStatus();
}

namespace {

absl::Status WritePrompts(const std::string& path, const std::vector<Prompt>& prompts) {
  std::ofstream f(path);
  f << "[";
  for (size_t i = 0; i < prompts.size(); ++i) f << (i ? "," : "") << "[" << absl::StrJoin(prompts[i], ",") << "]";
  f << "]\n";
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<PromptLogits> ReadLogits(const std::string& path, const std::vector<Prompt>& prompts, int vocab) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  PromptLogits logits;
  for (const Prompt& p : prompts) {
    std::vector<float> rows(p.size() * static_cast<size_t>(vocab));
    // The script writes little-endian float32; every machine we build for is little-endian.
    f.read(reinterpret_cast<char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
    if (!f) return absl::DataLossError(absl::StrCat(path, " is shorter than the prompts need"));
    logits.push_back(std::move(rows));
  }
  if (f.peek() != EOF) return absl::DataLossError(absl::StrCat(path, " is longer than the prompts need"));
  return logits;
}

}  // namespace

absl::StatusOr<std::vector<PromptLogits>> RunTorchReference(const std::string& python, const std::string& script,
                                                            const std::vector<ReferenceJob>& jobs,
                                                            const std::string& work_dir) {
  nlohmann::json manifest = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string tokens = absl::StrCat(work_dir, "/prompts_", i, ".json");
    if (absl::Status s = WritePrompts(tokens, jobs[i].prompts); !s.ok()) return s;
    manifest.push_back({{"model", jobs[i].model_dir},
                        {"tokens_file", tokens},
                        {"out", absl::StrCat(work_dir, "/torch_logits_", i, ".bin")},
                        {"int8_activations", jobs[i].int8_activations}});
  }
  const std::string manifest_path = work_dir + "/jobs.json";
  {
    std::ofstream f(manifest_path);
    f << manifest.dump(1) << "\n";
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", manifest_path));
  }
  auto out = RunCommand(absl::StrCat("'", python, "' '", script, "' --jobs '", manifest_path, "' --dtype float64"));
  if (!out.ok()) return out.status();
  std::vector<PromptLogits> results;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto logits = ReadLogits(manifest[i]["out"].get<std::string>(), jobs[i].prompts, jobs[i].vocab_size);
    if (!logits.ok()) return logits.status();
    results.push_back(std::move(*logits));
  }
  return results;
}

absl::StatusOr<PromptLogits> RunEngine(const std::string& model_dir, const std::vector<Prompt>& prompts,
                                       int split_at, int* vocab_size, const engine::ModelLoadOptions& load_options) {
  using engine::SequenceStep;
  std::unique_ptr<engine::Backend> backend = engine::CreateCpuBackend({});
  auto model = engine::LlamaModel::Load(model_dir, *backend, load_options);
  if (!model.ok()) return model.status();
  const int vocab = (*model)->config().vocab_size;
  *vocab_size = vocab;

  int blocks = 0;
  for (const Prompt& p : prompts) blocks += static_cast<int>(p.size()) / 16 + 2;
  auto kv = (*model)->CreateKvCache(blocks);
  if (!kv.ok()) return kv.status();

  PromptLogits logits(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (absl::Status s = (*kv)->AddSequence(i); !s.ok()) return s;
  }
  // Two rounds: tokens [0, cut) then [cut, n) of each prompt (one round when split_at == 0).
  for (int round = 0; round < 2; ++round) {
    std::vector<SequenceStep> steps;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int n = static_cast<int>(prompts[i].size());
      const int cut = split_at > 0 ? std::min(split_at, n) : n;
      const int begin = round == 0 ? 0 : cut;
      const int end = round == 0 ? cut : n;
      if (begin == end) continue;
      SequenceStep step;
      step.seq = i;
      step.tokens.assign(prompts[i].begin() + begin, prompts[i].begin() + end);
      for (int j = 0; j < end - begin; ++j) step.logit_nodes.push_back(j);
      steps.push_back(std::move(step));
    }
    if (steps.empty()) continue;
    engine::ForwardResult result;
    if (absl::Status s = (*model)->Forward(steps, **kv, &result); !s.ok()) return s;
    if (result.vocab_size != vocab) return absl::InternalError("ForwardResult has the wrong vocab size");
    int64_t row = 0;
    for (const SequenceStep& step : steps) {
      for (size_t j = 0; j < step.tokens.size(); ++j, ++row) {
        if (static_cast<size_t>((row + 1) * vocab) > result.logits.size()) {
          return absl::InternalError("ForwardResult has fewer rows than requested");
        }
        logits[step.seq].insert(logits[step.seq].end(), result.Row(row), result.Row(row) + vocab);
      }
    }
  }
  return logits;
}

double MaxAbsDiff(const PromptLogits& a, const PromptLogits& b) {
  if (a.size() != b.size()) return -1;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return -1;
    for (size_t j = 0; j < a[i].size(); ++j) {
      const double d = std::fabs(static_cast<double>(a[i][j]) - b[i][j]);
      if (std::isnan(d)) return std::numeric_limits<double>::infinity();  // a NaN must fail
      worst = std::max(worst, d);
    }
  }
  return worst;
}

}  // namespace splitspec::reference
