// The NCCL Communicator: one process per GPU, collectives on device memory, ordered on the
// CUDA stream the rank's backend runs on. Built only with the CUDA backend
// (SPLITSPEC_HAVE_NCCL).
//
// Start-up: rank 0 calls NewNcclUniqueId and hands the bytes to the other ranks out of band
// (the verifier: verifier/tp_membership.h, over TCP or a file); every rank then calls
// CreateNcclCommunicator with the same id, its rank and the group size (it blocks until all
// ranks have joined).
#ifndef SPLITSPEC_COMMON_ENGINE_COMM_NCCL_COMMUNICATOR_H_
#define SPLITSPEC_COMMON_ENGINE_COMM_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/engine/comm/communicator.h"

namespace splitspec::engine {

// NCCL's opaque group id, as bytes.
absl::StatusOr<std::string> NewNcclUniqueId();

// `stream` is the cudaStream_t (as void*, keeping CUDA headers out of this header) the rank's
// backend enqueues its kernels on; nullptr means the default stream. `device` is the CUDA
// device index of this rank. Collectives are enqueued, not waited for: stream order makes the
// next kernel see the result. NCCL sums are deterministic for a fixed group and size.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(const std::string& unique_id, int rank,
                                                                     int size, int device, void* stream);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_COMM_NCCL_COMMUNICATOR_H_
