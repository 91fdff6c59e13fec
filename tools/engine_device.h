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

// Reads --quantize none|int8 (default none); exits 2 with the reason when the value is unknown.
inline engine::WeightQuantization QuantizeFlagOrExit(const Args& args) {
  absl::StatusOr<engine::WeightQuantization> q = engine::ParseWeightQuantization(args.GetString("quantize", "none"));
  if (!q.ok()) {
    std::fprintf(stderr, "error: --quantize: %s\n", std::string(q.status().message()).c_str());
    std::exit(2);
  }
  return *q;
}

// Reads --kv-dtype f32|f16 (default f32); exits 2 with the reason when the value is unknown.
inline engine::DType KvDTypeFlagOrExit(const Args& args) {
  absl::StatusOr<engine::DType> dtype = engine::ParseKvDType(args.GetString("kv-dtype", "f32"));
  if (!dtype.ok()) {
    std::fprintf(stderr, "error: --kv-dtype: %s\n", std::string(dtype.status().message()).c_str());
    std::exit(2);
  }
  return *dtype;
}

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_ENGINE_DEVICE_H_
