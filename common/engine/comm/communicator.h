// The collective operations tensor parallelism needs, behind one interface: an in-process
// implementation (ranks are threads; tests run the sharding math on CPU) and an NCCL one (one
// process per GPU). The model calls only this, so sharded forwards are backend-agnostic.
//
// Pointers passed to a Communicator live in the memory of the backend its ranks run on: host
// memory for the in-process communicator (CPU backend), device memory for NCCL (CUDA backend).
//
// Every rank must issue the same collectives in the same order with the same sizes; a rank
// that skips one leaves the others waiting (that is why rank 0 alone decides acceptance in a
// tensor-parallel verifier and broadcasts the decision).
#ifndef SPLITSPEC_COMMON_ENGINE_COMM_COMMUNICATOR_H_
#define SPLITSPEC_COMMON_ENGINE_COMM_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace splitspec::engine {

// One rank's handle on a group. Thread-safety: a handle is used by one thread (its rank's);
// different ranks' handles are used concurrently.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[i] <- sum over ranks of data[i], on every rank. Implementations sum in a fixed order
  // that does not depend on timing, so equal inputs give equal bits from run to run.
  virtual absl::Status AllReduceSum(float* data, int64_t n) = 0;
  // Copies `n_bytes` at `data` on rank `root` into `data` on every other rank.
  virtual absl::Status Broadcast(void* data, size_t n_bytes, int root) = 0;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_COMM_COMMUNICATOR_H_
