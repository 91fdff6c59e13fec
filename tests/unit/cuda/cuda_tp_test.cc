// The NCCL communicator and tensor-parallel forwards on GPUs: a one-rank group on one GPU, and
// TP = 2 over NCCL (two GPUs, ranks as threads) against the CPU's unsharded logits. Skipped
// without enough GPUs.
#include <cuda_runtime.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/engine/comm/nccl_communicator.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/model/model_maker.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace splitspec::engine::testing {
namespace {

using CudaNcclTest = CudaTest;

TEST_F(CudaNcclTest, OneRankGroupAllReducesAndBroadcastsInPlace) {
  auto id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  auto comm = CreateNcclCommunicator(*id, 0, 1, 0, cuda_->stream());
  ASSERT_TRUE(comm.ok()) << comm.status();
  const std::vector<float> values = RandomValues(333, 60);
  Tensor t = Make(*cuda_, values, 1, 333);
  ASSERT_TRUE((*comm)->AllReduceSum(t.f32(), 333).ok());
  ASSERT_TRUE((*comm)->Broadcast(t.data, t.n_bytes(), 0).ok());
  EXPECT_EQ(Read(*cuda_, t), values);
  EXPECT_EQ((*comm)->Broadcast(t.data, 4, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCommunicator("short", 0, 1, 0, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaNcclTest, TwoGpuShardsMatchTheCpuModel) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP = 2 over NCCL needs two GPUs; " << CudaDeviceCount() << " present";
  ModelConfig config = *PresetConfig("tiny");
  const std::string dir = splitspec::testing::ProcessTempDir("cuda_") + "/tp";
  ASSERT_TRUE(WriteRandomModel(config, DType::kBF16, 9, dir).ok());
  std::vector<int32_t> tokens = {1, 7, 99, 300, 2, 511, 64};
  SequenceStep step{1, tokens, {}, {0, 1, 2, 3, 4, 5, 6}};

  auto cpu_model = LlamaModel::Load(dir, *cpu_);
  ASSERT_TRUE(cpu_model.ok());
  auto cpu_kv = (*cpu_model)->CreateKvCache(16);
  ASSERT_TRUE(cpu_kv.ok() && (*cpu_kv)->AddSequence(1).ok());
  ForwardResult expected;
  ASSERT_TRUE((*cpu_model)->Forward({step}, **cpu_kv, &expected).ok());

  auto id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<ForwardResult> results(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      status[r] = [&]() -> absl::Status {
        auto backend = CreateCudaBackend({.device = r});
        if (!backend.ok()) return backend.status();
        auto comm = CreateNcclCommunicator(*id, r, 2, r, (*backend)->stream());
        if (!comm.ok()) return comm.status();
        ModelLoadOptions options;
        options.tp_rank = r;
        options.tp_size = 2;
        options.comm = comm->get();
        auto model = LlamaModel::Load(dir, **backend, options);
        if (!model.ok()) return model.status();
        auto kv = (*model)->CreateKvCache(16);
        if (!kv.ok()) return kv.status();
        if (absl::Status s = (*kv)->AddSequence(1); !s.ok()) return s;
        if (absl::Status s = (*model)->Forward({step}, **kv, &results[r]); !s.ok()) return s;
        return (*backend)->Synchronize();
      }();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  ExpectNear(expected.logits, results[0].logits, 1e-3f, "TP 2 on GPUs vs CPU");
  EXPECT_EQ(results[0].logits, results[1].logits) << "ranks must return identical logits";
}

}  // namespace
}  // namespace splitspec::engine::testing
