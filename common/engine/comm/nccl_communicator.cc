// NCCL collectives behind the Communicator interface (see nccl_communicator.h).
#include "common/engine/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/engine/cuda/cuda_check.h"

namespace splitspec::engine {
namespace {

// Thread-safety: one thread per handle, like every Communicator.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, cudaStream_t stream)
      : comm_(comm), rank_(rank), size_(size), stream_(stream) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(float* data, int64_t n) override {
    NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream_));
    return absl::OkStatus();
  }

  absl::Status Broadcast(void* data, size_t n_bytes, int root) override {
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " outside [0, ", size_, ")"));
    }
    NCCL_CHECK(ncclBroadcast(data, data, n_bytes, ncclUint8, root, comm_, stream_));
    return absl::OkStatus();
  }

 private:
  ncclComm_t comm_;
  const int rank_;
  const int size_;
  cudaStream_t stream_;
};

}  // namespace

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(const std::string& unique_id, int rank,
                                                                     int size, int device, void* stream) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("an NCCL unique id has ", sizeof(id.internal), " bytes, got ",
                                                   unique_id.size()));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside a group of ", size));
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  return std::make_unique<NcclCommunicator>(comm, rank, size, static_cast<cudaStream_t>(stream));
}

}  // namespace splitspec::engine
