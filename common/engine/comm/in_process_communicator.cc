// In-process collectives: ranks publish their buffer pointers, meet at a barrier, and each
// rank then reduces a disjoint slice of the elements across all buffers. No two ranks touch the
// same element, so no scratch copy is needed, and each element's sum order is fixed (rank 0
// first), whatever the thread timing.
#include "common/engine/comm/in_process_communicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace splitspec::engine {
namespace {

// State shared by the ranks of one group. Thread-safe: the barrier is guarded by mu_; the
// published pointers are written before and read after a barrier, which orders them.
class Group {
 public:
  explicit Group(int n_ranks) : n_ranks_(n_ranks), buffers_(n_ranks), sizes_(n_ranks) {}

  int n_ranks() const { return n_ranks_; }

  // Blocks until all ranks have arrived (a reusable generation-counting barrier).
  void Barrier() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == n_ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

  void Publish(int rank, void* buffer, int64_t size) {
    buffers_[rank] = buffer;
    sizes_[rank] = size;
  }
  void* buffer(int rank) const { return buffers_[rank]; }
  int64_t size(int rank) const { return sizes_[rank]; }

 private:
  const int n_ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<void*> buffers_;
  std::vector<int64_t> sizes_;
};

// Thread-safety: see Communicator (one thread per handle).
class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->n_ranks(); }

  absl::Status AllReduceSum(float* data, int64_t n) override {
    if (n < 0) return absl::InvalidArgumentError("AllReduceSum of a negative element count");
    group_->Publish(rank_, data, n);
    group_->Barrier();
    // Every rank sees every size, so all ranks take the same branch here.
    absl::Status status = CheckSizes("AllReduceSum");
    if (status.ok()) {
      const int n_ranks = group_->n_ranks();
      const int64_t begin = n * rank_ / n_ranks;
      const int64_t end = n * (rank_ + 1) / n_ranks;
      for (int64_t i = begin; i < end; ++i) {
        float sum = static_cast<const float*>(group_->buffer(0))[i];
        for (int r = 1; r < n_ranks; ++r) sum += static_cast<const float*>(group_->buffer(r))[i];
        for (int r = 0; r < n_ranks; ++r) static_cast<float*>(group_->buffer(r))[i] = sum;
      }
    }
    group_->Barrier();  // nobody reuses the published pointers until all slices are written
    return status;
  }

  absl::Status Broadcast(void* data, size_t n_bytes, int root) override {
    if (root < 0 || root >= group_->n_ranks()) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " outside [0, ", group_->n_ranks(), ")"));
    }
    group_->Publish(rank_, data, static_cast<int64_t>(n_bytes));
    group_->Barrier();
    absl::Status status = CheckSizes("Broadcast");
    if (status.ok() && rank_ != root && n_bytes > 0) std::memcpy(data, group_->buffer(root), n_bytes);
    group_->Barrier();
    return status;
  }

 private:
  absl::Status CheckSizes(const char* op) const {
    for (int r = 1; r < group_->n_ranks(); ++r) {
      if (group_->size(r) != group_->size(0)) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": rank 0 passed ", group_->size(0), " but rank ", r,
                                                       " passed ", group_->size(r)));
      }
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Group> group_;
  const int rank_;
};

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> CreateInProcessGroup(int n_ranks) {
  if (n_ranks < 1) return absl::InvalidArgumentError(absl::StrCat("a group needs at least one rank, got ", n_ranks));
  auto group = std::make_shared<Group>(n_ranks);
  std::vector<std::unique_ptr<Communicator>> handles;
  for (int r = 0; r < n_ranks; ++r) handles.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return handles;
}

}  // namespace splitspec::engine
