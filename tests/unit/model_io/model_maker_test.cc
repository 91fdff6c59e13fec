// make-model: the presets' shapes, the written directory's contents,
// determinism, dtype consistency, overrides, the spm_train tokenizer, and drafts.
#include "common/engine/model/model_maker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/engine/dtype.h"
#include "common/engine/model/draft_maker.h"
#include "common/engine/model/llama_tensors.h"
#include "common/engine/model/random_weights.h"
#include "common/engine/model/safetensors.h"
#include "common/engine/model/tokenizer_trainer.h"
#include "tests/unit/model_io/test_files.h"

namespace splitspec::engine {
namespace {

using testing::FreshDir;
using testing::ReadBytes;

int64_t ParameterCount(const ModelConfig& config) {
  int64_t total = 0;
  for (const TensorSpec& spec : LlamaTensorSpecs(config)) {
    int64_t n = 1;
    for (int64_t dim : spec.shape) n *= dim;
    total += n;
  }
  return total;
}

std::vector<float> AsFloats(const TensorView& view) {
  std::vector<float> values(static_cast<size_t>(view.n_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (view.dtype == DType::kF32) {
      std::memcpy(&values[i], view.data + 4 * i, 4);
    } else {
      const uint16_t h = static_cast<uint16_t>(view.data[2 * i] | (view.data[2 * i + 1] << 8));
      values[i] = view.dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
    }
  }
  return values;
}

TEST(ModelMakerTest, PresetsMatchTheSpecification) {
  absl::StatusOr<ModelConfig> tiny = PresetConfig("tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->n_layers, 2);
  EXPECT_EQ(tiny->hidden_size, 64);
  EXPECT_EQ(tiny->n_heads, 4);
  EXPECT_EQ(tiny->n_heads_kv, 2);  // GQA
  EXPECT_EQ(tiny->intermediate_size, 192);
  EXPECT_TRUE(tiny->tie_word_embeddings);

  absl::StatusOr<ModelConfig> small = PresetConfig("small");
  ASSERT_TRUE(small.ok());
  EXPECT_GT(ParameterCount(*small), 2'000'000);
  EXPECT_LT(ParameterCount(*small), 10'000'000);

  absl::StatusOr<ModelConfig> medium = PresetConfig("medium");
  ASSERT_TRUE(medium.ok());
  EXPECT_EQ(medium->hidden_size, 768);
  EXPECT_EQ(medium->n_layers, 12);
  EXPECT_EQ(medium->n_heads, 12);
  EXPECT_EQ(medium->n_heads_kv, 4);
  EXPECT_EQ(medium->intermediate_size, 2048);
  EXPECT_EQ(medium->vocab_size, 8192);
  EXPECT_GT(ParameterCount(*medium), 80'000'000);
  EXPECT_LT(ParameterCount(*medium), 100'000'000);

  absl::StatusOr<ModelConfig> large = PresetConfig("large");
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->hidden_size, 2048);
  EXPECT_EQ(large->head_dim, 128);
  EXPECT_GT(ParameterCount(*large), 550'000'000);
  EXPECT_LT(ParameterCount(*large), 600'000'000);

  for (const char* name : {"tiny", "small", "medium", "large"}) {
    absl::StatusOr<ModelConfig> c = PresetConfig(name);
    // Presets are valid configs: they survive the parser's range checks.
    absl::StatusOr<ModelConfig> parsed = ParseModelConfig(ModelConfigToJson(*c));
    EXPECT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(c->bos_token_id, 1);
    EXPECT_EQ(c->eos_token_id, 2);
  }
  EXPECT_EQ(PresetConfig("huge").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelMakerTest, ParseDTypeName) {
  EXPECT_EQ(*ParseDTypeName("f32"), DType::kF32);
  EXPECT_EQ(*ParseDTypeName("F16"), DType::kF16);
  EXPECT_EQ(*ParseDTypeName("bf16"), DType::kBF16);
  EXPECT_EQ(ParseDTypeName("q8").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelMakerTest, WritesEveryTensorWithItsShapeAndAValidConfig) {
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  config->attention_bias = true;
  config->tie_word_embeddings = false;
  const std::string dir = FreshDir();
  ASSERT_TRUE(WriteRandomModel(*config, DType::kBF16, 5, dir).ok());

  absl::StatusOr<ModelConfig> loaded = LoadModelConfig(dir + "/config.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->attention_bias);
  EXPECT_FALSE(loaded->tie_word_embeddings);
  EXPECT_NE(ReadBytes(dir + "/config.json").find("\"torch_dtype\": \"bfloat16\""),
            std::string::npos);

  auto archive = SafetensorsArchive::OpenDirectory(dir);
  ASSERT_TRUE(archive.ok()) << archive.status();
  const std::vector<TensorSpec> specs = LlamaTensorSpecs(*loaded);
  EXPECT_EQ((*archive)->TensorNames().size(), specs.size());
  for (const TensorSpec& spec : specs) {
    absl::StatusOr<TensorView> view = (*archive)->GetWithShape(spec.name, spec.shape);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->dtype, DType::kBF16);
  }
  // Hugging Face names for the parts a draft and the reference rely on.
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.bias",
        "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"}) {
    EXPECT_TRUE((*archive)->Contains(name)) << name;
  }
}

TEST(ModelMakerTest, SameSeedSameBytesOtherSeedOtherBytes) {
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  const std::string a = FreshDir(), b = FreshDir(), c = FreshDir();
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF32, 42, a).ok());
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF32, 42, b).ok());
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF32, 43, c).ok());
  EXPECT_EQ(ReadBytes(a + "/model.safetensors"), ReadBytes(b + "/model.safetensors"));
  EXPECT_NE(ReadBytes(a + "/model.safetensors"), ReadBytes(c + "/model.safetensors"));
}

TEST(ModelMakerTest, HalfPrecisionFilesHoldTheRoundedF32Weights) {
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  const std::string f32_dir = FreshDir(), f16_dir = FreshDir(), bf16_dir = FreshDir();
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF32, 9, f32_dir).ok());
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF16, 9, f16_dir).ok());
  ASSERT_TRUE(WriteRandomModel(*config, DType::kBF16, 9, bf16_dir).ok());
  auto f32 = SafetensorsArchive::OpenDirectory(f32_dir);
  auto f16 = SafetensorsArchive::OpenDirectory(f16_dir);
  auto bf16 = SafetensorsArchive::OpenDirectory(bf16_dir);
  ASSERT_TRUE(f32.ok() && f16.ok() && bf16.ok());
  for (const std::string& name : (*f32)->TensorNames()) {
    const std::vector<float> exact = AsFloats(*(*f32)->Get(name));
    const std::vector<float> half = AsFloats(*(*f16)->Get(name));
    const std::vector<float> brain = AsFloats(*(*bf16)->Get(name));
    ASSERT_EQ(half.size(), exact.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_EQ(half[i], F16ToF32(F32ToF16(exact[i]))) << name << "[" << i << "]";
      ASSERT_EQ(brain[i], BF16ToF32(F32ToBF16(exact[i]))) << name << "[" << i << "]";
    }
  }
}

TEST(ModelMakerTest, WeightScalesFollowTheDesign) {
  absl::StatusOr<ModelConfig> config = PresetConfig("small");
  ASSERT_TRUE(config.ok());
  const std::string dir = FreshDir();
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF32, 1, dir).ok());
  auto archive = SafetensorsArchive::OpenDirectory(dir);
  ASSERT_TRUE(archive.ok());
  auto stats = [&](const std::string& name, double* mean, double* std) {
    const std::vector<float> v = AsFloats(*(*archive)->Get(name));
    double sum = 0, sum2 = 0;
    for (float x : v) sum += x, sum2 += static_cast<double>(x) * x;
    *mean = sum / v.size();
    *std = std::sqrt(sum2 / v.size() - *mean * *mean);
  };
  double mean, std;
  stats("model.layers.0.input_layernorm.weight", &mean, &std);
  EXPECT_NEAR(mean, 1.0, 0.05);  // norms around 1, with noise
  EXPECT_GT(std, 0.02);
  stats("model.layers.2.mlp.up_proj.weight", &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std, 1.0 / std::sqrt(256.0), 0.01);  // keeps activations at RMS ~1
  stats("model.embed_tokens.weight", &mean, &std);
  EXPECT_GT(std, 0.05);  // embedding rows are not all alike
}

TEST(ModelMakerTest, NormalGeneratorIsStandardAndSeeded) {
  const std::vector<float> a = NormalValues(200000, 0.0f, 1.0f, 3);
  const std::vector<float> b = NormalValues(200000, 0.0f, 1.0f, 3);
  EXPECT_EQ(a, b);
  double sum = 0, sum2 = 0, beyond2 = 0;
  for (float x : a) sum += x, sum2 += static_cast<double>(x) * x, beyond2 += std::fabs(x) > 2;
  EXPECT_NEAR(sum / a.size(), 0.0, 0.01);
  EXPECT_NEAR(sum2 / a.size(), 1.0, 0.02);
  EXPECT_NEAR(beyond2 / a.size(), 0.0455, 0.003);  // normal tails, not uniform
}

TEST(ModelMakerTest, OverridesChangeThePreset) {
  MakeModelOptions options;
  options.tie_embeddings = false;
  options.attention_bias = true;
  options.rope_llama3 = true;
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  ApplyOverrides(options, &*config);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_TRUE(config->attention_bias);
  EXPECT_TRUE(config->rope_scaling.enabled);
  // The scaled band must fall inside tiny's frequencies to be exercised: the longest
  // wavelength (2 pi theta^((d-2)/d)) must exceed the original context.
  const double longest =
      2 * M_PI * std::pow(config->rope_theta, (config->head_dim - 2.0) / config->head_dim);
  EXPECT_GT(longest, config->rope_scaling.original_max_position_embeddings /
                         config->rope_scaling.low_freq_factor);
  absl::StatusOr<ModelConfig> parsed = ParseModelConfig(ModelConfigToJson(*config));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->rope_scaling.enabled);
}

// Runs a command and returns its stdout.
std::string RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  pclose(pipe);
  return output;
}

TEST(ModelMakerTest, MakeModelTrainsAMatchingTokenizer) {
  MakeModelOptions options;
  options.preset = "tiny";
  options.out_dir = FreshDir() + "/nested/tiny";
  options.seed = 3;
  int calls = 0;
  options.progress = [&calls](int done, int total, const std::string&) {
    ++calls;
    EXPECT_LE(done, total);
  };
  const absl::Status status = MakeModel(options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(calls, 20);  // tiny: embedding + 2 x 9 layer tensors + final norm (tied head)

  // spm's own tools read the model: exactly vocab_size pieces, special tokens at 0/1/2.
  const std::string vocab =
      RunCommand("spm_export_vocab --model=" + options.out_dir + "/tokenizer.model 2>/dev/null");
  std::vector<std::string> pieces;
  for (size_t start = 0; start < vocab.size();) {
    const size_t end = vocab.find('\n', start);
    const std::string line = vocab.substr(start, end - start);
    pieces.push_back(line.substr(0, line.find('\t')));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  ASSERT_EQ(pieces.size(), 512u);
  EXPECT_EQ(pieces[0], "<unk>");
  EXPECT_EQ(pieces[1], "<s>");
  EXPECT_EQ(pieces[2], "</s>");
  EXPECT_EQ(pieces[3], "<0x00>");  // byte fallback pieces
  const std::string ids = RunCommand(
      "echo 'Hello tokenizer 12345 \xc3\xa9t\xc3\xa9' | spm_encode --model=" + options.out_dir +
      "/tokenizer.model --output_format=id");
  std::vector<int> parsed;
  for (size_t pos = 0; pos < ids.size();) {
    size_t used = 0;
    parsed.push_back(std::stoi(ids.substr(pos), &used));
    pos += used;
    while (pos < ids.size() && std::isspace(static_cast<unsigned char>(ids[pos]))) ++pos;
  }
  ASSERT_GT(parsed.size(), 3u) << ids;
  for (int id : parsed) {
    EXPECT_GT(id, 2) << "no <unk> or control ids for plain text with byte fallback: " << ids;
    EXPECT_LT(id, 512) << ids;
  }
}

TEST(ModelMakerTest, MissingCorpusIsNotFound) {
  MakeModelOptions options;
  options.out_dir = FreshDir();
  options.corpus = options.out_dir + "/no_such_corpus.txt";
  const absl::Status status = MakeModel(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("no_such_corpus.txt"), std::string::npos) << status;
}

// spm_train writes its command line into the model; run where it was, the file named the output
// directory and the corpus's path, so the same model made twice differed in its tokenizer.
TEST(ModelMakerTest, TheTokenizerDependsOnTheCorpusNotOnTheDirectories) {
  const std::string a = FreshDir(), b = FreshDir() + "/a/longer/path/than/the/first";
  const std::string copy_dir = FreshDir();
  testing::WriteBytes(copy_dir + "/corpus.txt", ReadBytes(DefaultTokenizerCorpus()));
  ASSERT_TRUE(TrainTokenizer(DefaultTokenizerCorpus(), 512, a).ok());
  std::filesystem::create_directories(b);
  ASSERT_TRUE(TrainTokenizer(copy_dir + "/corpus.txt", 512, b).ok());
  const std::string model_a = ReadBytes(a + "/tokenizer.model");
  ASSERT_FALSE(model_a.empty());
  EXPECT_EQ(model_a, ReadBytes(b + "/tokenizer.model"));
  EXPECT_EQ(model_a.find(a), std::string::npos);
  // Nothing but the model stays behind: the corpus link, the log and the .vocab are removed.
  for (const char* name : {"tokenizer_corpus.txt", "spm_train.log", "tokenizer.vocab"}) {
    EXPECT_NE(::access((b + "/" + name).c_str(), F_OK), 0) << name;
  }
}

// The trainer reads the corpus as tokenizer_corpus.txt in the output directory. A corpus kept
// there under that name is read in place and left alone; another file of that name is never
// replaced or removed.
TEST(ModelMakerTest, ACorpusFileInTheOutputDirectoryIsNeverReplaced) {
  const std::string corpus = ReadBytes(DefaultTokenizerCorpus());
  const std::string in_place = FreshDir();
  testing::WriteBytes(in_place + "/tokenizer_corpus.txt", corpus);
  const absl::Status trained = TrainTokenizer(in_place + "/tokenizer_corpus.txt", 512, in_place);
  ASSERT_TRUE(trained.ok()) << trained;
  EXPECT_EQ(ReadBytes(in_place + "/tokenizer_corpus.txt"), corpus);
  EXPECT_FALSE(ReadBytes(in_place + "/tokenizer.model").empty());

  const std::string other = FreshDir();
  testing::WriteBytes(other + "/tokenizer_corpus.txt", "somebody else's file\n");
  const absl::Status refused = TrainTokenizer(DefaultTokenizerCorpus(), 512, other);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(ReadBytes(other + "/tokenizer_corpus.txt"), "somebody else's file\n");
}

// The bundled corpus fills the largest preset's vocabulary (spm_train refuses a vocabulary the
// corpus cannot fill), and digits, lower-case letters and common punctuation get pieces of
// their own, so ordinary text does not fall back to byte pieces.
TEST(ModelMakerTest, DefaultCorpusFillsTheLargestPresetVocabulary) {
  const absl::StatusOr<ModelConfig> medium = PresetConfig("medium");
  ASSERT_TRUE(medium.ok()) << medium.status();
  const std::string dir = FreshDir();
  const absl::Status trained = TrainTokenizer(DefaultTokenizerCorpus(), medium->vocab_size, dir);
  ASSERT_TRUE(trained.ok()) << trained;
  std::string ascii = "0123456789 .,;:!?()[]{}=+-*/<>";
  for (char c = 'a'; c <= 'z'; ++c) ascii += c;
  testing::WriteBytes(dir + "/ascii.txt", ascii + "\n");
  const std::string pieces =
      RunCommand("spm_encode --model=" + dir + "/tokenizer.model --output_format=piece < " + dir + "/ascii.txt");
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.find("<0x"), std::string::npos) << pieces;
}

std::string UntiedTargetWithTokenizer() {
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  config->n_layers = 3;
  config->tie_word_embeddings = false;
  config->attention_bias = true;
  const std::string dir = FreshDir();
  EXPECT_TRUE(WriteRandomModel(*config, DType::kF16, 8, dir).ok());
  testing::WriteBytes(dir + "/tokenizer.model", "not really a tokenizer, copied verbatim");
  return dir;
}

TEST(ModelMakerTest, DraftKeepsFirstLayersAndSharedTensorsByteForByte) {
  const std::string target = UntiedTargetWithTokenizer();
  const std::string draft = FreshDir() + "/draft";
  const absl::Status status = MakeDraftModel(target, 1, draft);
  ASSERT_TRUE(status.ok()) << status;

  absl::StatusOr<ModelConfig> target_config = LoadModelConfig(target + "/config.json");
  absl::StatusOr<ModelConfig> draft_config = LoadModelConfig(draft + "/config.json");
  ASSERT_TRUE(draft_config.ok()) << draft_config.status();
  EXPECT_EQ(draft_config->n_layers, 1);
  EXPECT_EQ(draft_config->hidden_size, target_config->hidden_size);
  EXPECT_EQ(draft_config->vocab_size, target_config->vocab_size);
  EXPECT_EQ(draft_config->attention_bias, target_config->attention_bias);
  EXPECT_EQ(draft_config->tie_word_embeddings, target_config->tie_word_embeddings);
  EXPECT_EQ(ReadBytes(draft + "/tokenizer.model"), ReadBytes(target + "/tokenizer.model"));

  auto t = SafetensorsArchive::OpenDirectory(target);
  auto d = SafetensorsArchive::OpenDirectory(draft);
  ASSERT_TRUE(t.ok() && d.ok());
  const std::vector<TensorSpec> specs = LlamaTensorSpecs(*draft_config);
  EXPECT_EQ((*d)->TensorNames().size(), specs.size());
  EXPECT_FALSE((*d)->Contains("model.layers.1.input_layernorm.weight"));
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.bias",
        "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"}) {
    absl::StatusOr<TensorView> a = (*t)->Get(name);
    absl::StatusOr<TensorView> b = (*d)->Get(name);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_EQ(b->dtype, DType::kF16);
    EXPECT_EQ(a->shape, b->shape);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(a->data), a->n_bytes),
              std::string(reinterpret_cast<const char*>(b->data), b->n_bytes))
        << name;
  }
}

TEST(ModelMakerTest, DraftInAnotherDTypeHoldsEachValueRoundedThroughF32) {
  const std::string target = UntiedTargetWithTokenizer();  // F16, 3 layers
  const std::string converted = FreshDir() + "/bf16";
  const absl::Status status = MakeDraftModel(target, 3, converted, {}, DType::kBF16);
  ASSERT_TRUE(status.ok()) << status;
  absl::StatusOr<ModelConfig> config = LoadModelConfig(converted + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->n_layers, 3);
  EXPECT_NE(ReadBytes(converted + "/config.json").find("\"torch_dtype\": \"bfloat16\""), std::string::npos);

  auto t = SafetensorsArchive::OpenDirectory(target);
  auto c = SafetensorsArchive::OpenDirectory(converted);
  ASSERT_TRUE(t.ok() && c.ok());
  for (const char* name : {"model.embed_tokens.weight", "model.layers.2.self_attn.q_proj.bias",
                           "model.layers.1.mlp.down_proj.weight", "lm_head.weight"}) {
    absl::StatusOr<TensorView> a = (*t)->Get(name);
    absl::StatusOr<TensorView> b = (*c)->Get(name);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    ASSERT_EQ(b->dtype, DType::kBF16) << name;
    ASSERT_EQ(a->shape, b->shape) << name;
    ASSERT_EQ(b->n_bytes, a->n_bytes) << name;  // 2 bytes a value either way
    for (int64_t i = 0; i < a->n_elements(); ++i) {
      uint16_t half, brain;
      std::memcpy(&half, a->data + 2 * i, 2);
      std::memcpy(&brain, b->data + 2 * i, 2);
      ASSERT_EQ(brain, F32ToBF16(F16ToF32(half))) << name << " element " << i;
    }
  }
  // To F32 and back to F16 gives the target's bytes again: F16 -> F32 is exact.
  const std::string wide = FreshDir() + "/f32";
  const std::string back = FreshDir() + "/f16";
  ASSERT_TRUE(MakeDraftModel(target, 3, wide, {}, DType::kF32).ok());
  ASSERT_TRUE(MakeDraftModel(wide, 3, back, {}, DType::kF16).ok());
  auto w = SafetensorsArchive::OpenDirectory(wide);
  auto r = SafetensorsArchive::OpenDirectory(back);
  ASSERT_TRUE(w.ok() && r.ok());
  absl::StatusOr<TensorView> original = (*t)->Get("model.layers.0.mlp.gate_proj.weight");
  absl::StatusOr<TensorView> widened = (*w)->Get("model.layers.0.mlp.gate_proj.weight");
  absl::StatusOr<TensorView> returned = (*r)->Get("model.layers.0.mlp.gate_proj.weight");
  ASSERT_TRUE(original.ok() && widened.ok() && returned.ok());
  EXPECT_EQ(widened->dtype, DType::kF32);
  EXPECT_EQ(widened->n_bytes, 2 * original->n_bytes);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(original->data), original->n_bytes),
            std::string(reinterpret_cast<const char*>(returned->data), returned->n_bytes));
}

TEST(ModelMakerTest, DraftRejectsBadLayerCountsAndBrokenTargets) {
  const std::string target = UntiedTargetWithTokenizer();
  for (int layers : {0, 4, -1}) {
    const absl::Status status = MakeDraftModel(target, layers, FreshDir());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << layers;
    EXPECT_NE(status.message().find("--layers"), std::string::npos) << status;
  }
  // A target whose checkpoint lacks a tensor the draft needs.
  absl::StatusOr<ModelConfig> config = LoadModelConfig(target + "/config.json");
  ASSERT_TRUE(config.ok());
  config->tie_word_embeddings = true;  // no lm_head in this checkpoint...
  const std::string broken = FreshDir();
  ASSERT_TRUE(WriteRandomModel(*config, DType::kF32, 1, broken).ok());
  config->tie_word_embeddings = false;  // ...but the config asks for one
  ASSERT_TRUE(WriteConfigJson(*config, DType::kF32, broken).ok());
  const absl::Status missing = MakeDraftModel(broken, 1, FreshDir());
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("lm_head.weight"), std::string::npos) << missing;
}

}  // namespace
}  // namespace splitspec::engine
