// Ranks as threads (see tp_group.h).
#include "verifier/tp_group.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/comm/in_process_communicator.h"
#include "common/engine/cuda/select_backend.h"

namespace splitspec::verifier {

absl::StatusOr<std::unique_ptr<InProcessTpGroup>> InProcessTpGroup::Start(
    const ReplicaOptions& options, StepObserver observer) {
  if (options.tp_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a tensor-parallel group needs 2 or more ranks, got ", options.tp_size));
  }
  absl::StatusOr<engine::DeviceSpec> device = engine::ParseDevice(options.device);
  if (!device.ok()) return device.status();
  if (device->cuda) {
    return absl::InvalidArgumentError(
        "ranks as threads of one process use the in-process communicator, which needs "
        "--device cpu; on GPUs run one process per rank (--tp N --tp-rank R, NCCL)");
  }
  auto comms = engine::CreateInProcessGroup(options.tp_size);
  if (!comms.ok()) return comms.status();
  std::unique_ptr<InProcessTpGroup> group(new InProcessTpGroup());
  group->comms_ = std::move(*comms);

  for (int r = 1; r < options.tp_size; ++r) {
    group->followers_.emplace_back([options, observer, r, comm = group->comms_[r].get()] {
      ReplicaOptions rank_options = options;
      rank_options.tp_rank = r;
      absl::StatusOr<std::unique_ptr<VerifierReplica>> replica =
          VerifierReplica::Create(rank_options, comm);
      // A failed load failed on every rank (the replicas vote), and rank 0 reports it.
      if (!replica.ok()) return;
      StepChannel channel((*replica)->backend(), *comm);
      const absl::Status followed = RunFollower(**replica, channel, observer);
      if (!followed.ok()) {
        std::fprintf(stderr,
                     "splitspec-verifier: tensor-parallel rank %d cannot follow rank 0: %s\n", r,
                     std::string(followed.message()).c_str());
        std::abort();
      }
    });
  }
  ReplicaOptions rank0_options = options;
  rank0_options.tp_rank = 0;
  absl::StatusOr<std::unique_ptr<VerifierReplica>> rank0 =
      VerifierReplica::Create(rank0_options, group->comms_[0].get());
  if (!rank0.ok()) {
    // Every follower saw the same vote and returned.
    for (std::thread& t : group->followers_) t.join();
    group->followers_.clear();
    return rank0.status();
  }
  group->rank0_ = std::move(*rank0);
  group->channel0_ = std::make_unique<StepChannel>(group->rank0_->backend(), *group->comms_[0]);
  return group;
}

InProcessTpGroup::~InProcessTpGroup() {
  if (channel0_ != nullptr) {
    const absl::Status sent = channel0_->Send(StepMessage{StepKind::kShutdown, {}, {}, {}});
    if (!sent.ok()) {
      std::fprintf(stderr, "splitspec-verifier: cannot stop the tensor-parallel ranks: %s\n",
                   std::string(sent.message()).c_str());
      std::abort();
    }
  }
  for (std::thread& t : followers_) t.join();
  channel0_.reset();
  rank0_.reset();
}

}  // namespace splitspec::verifier
