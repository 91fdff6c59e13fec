// `--device cpu|cuda|cuda:N` for the subcommands that run the engine locally (generate --model,
// bench-engine): one flag, one error path. A device this build or machine lacks is a usage
// error (exit 2 with the reason), never a crash.
#ifndef SPLITSPEC_TOOLS_ENGINE_DEVICE_H_
#define SPLITSPEC_TOOLS_ENGINE_DEVICE_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/engine/backend.h"
#include "common/engine/cuda/select_backend.h"
#include "common/engine/kv/kv_cache.h"
#include "common/engine/model/llama_model.h"
#include "tools/command.h"

namespace splitspec::tools {

// Reads --device (default cpu) and checks it; exits 2 with the reason when unusable.
inline engine::DeviceSpec DeviceFlagOrExit(const Args& args) {
  const std::string device = args.GetString("device", "cpu");
  if (absl::Status s = engine::CheckDevice(device); !s.ok()) {
    std::fprintf(stderr, "error: --device: %s\n", std::string(s.message()).c_str());
    std::exit(2);
  }
  return *engine::ParseDevice(device);
}

// The backend for a checked device (`threads` applies to the CPU); exits 1 when creating it
// fails anyway (CUDA initialisation errors).
inline std::unique_ptr<engine::Backend> CreateBackendOrExit(const engine::DeviceSpec& device,
                                                            int threads) {
  if (absl::Status s = engine::BindCallingThread(device, threads); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
  absl::StatusOr<std::unique_ptr<engine::Backend>> backend =
      engine::CreateBackendByName(device.ToString(), engine::CpuBackendOptions{threads});
  if (!backend.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(backend.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*backend);
}

// Reads flag --NAME (default `fallback`) through `parse` (string -> absl::StatusOr<T>); exits 2
// with the reason when the value is unknown.
template <typename ParseFn>
auto ParsedFlagOrExit(const Args& args, const char* name, const char* fallback, ParseFn&& parse) {
  auto parsed = parse(args.GetString(name, fallback));
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: --%s: %s\n", name, std::string(parsed.status().message()).c_str());
    std::exit(2);
  }
  return *std::move(parsed);
}

// --quantize none|int8 (default none).
inline engine::WeightQuantization QuantizeFlagOrExit(const Args& args) {
  return ParsedFlagOrExit(args, "quantize", "none", engine::ParseWeightQuantization);
}

// --kv-dtype f32|f16 (default f32).
inline engine::DType KvDTypeFlagOrExit(const Args& args) {
  return ParsedFlagOrExit(args, "kv-dtype", "f32", engine::ParseKvDType);
}

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_ENGINE_DEVICE_H_
