// Host buffers for tensors and the read probe.
//
// A batch-1 decode step reads every weight once, streaming through far more memory than the
// TLB maps in 4 KiB pages; on a virtual machine each TLB miss is a two-level page walk. Backed
// by 2 MiB pages the same kernels decode up to 10% faster (docs/architecture.md, "Host memory").
// A model's matrices are mostly smaller than 2 MiB, and a huge page needs 2 MiB of one mapping
// to itself, so buffers of kArenaMinBytes and more are carved from shared chunks: anonymous
// mappings aligned to 2 MiB and advised MADV_HUGEPAGE, which the kernel honours when
// transparent huge pages are "always" or "madvise" (Debian's default) and ignores otherwise.
// Smaller buffers (norm weights, one token's activations) come from the C allocator.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_HOST_MEMORY_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_HOST_MEMORY_H_

#include <cstddef>
#include <string>

namespace splitspec::engine::cpu {

constexpr size_t kHostAlignment = 64;               // one cache line, and a full AVX-512 register
constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page
constexpr size_t kArenaMinBytes = size_t{64} << 10;
constexpr size_t kArenaChunkBytes = size_t{64} << 20;  // a larger buffer gets a chunk of its own

// Where a buffer's memory comes from: chunks for buffers of kArenaMinBytes and more (the
// default), or the C allocator for all (base pages; what `bench-engine --compare-base-pages`
// measures against).
enum class HostMemory { kHugePageChunks, kCAllocator };

// Zero-filled, writable memory for `bytes` (at least one), aligned to kHostAlignment, and to a
// 4 KiB page when it comes from a chunk; nullptr when the system has no memory for it.
void* AllocateHostBuffer(size_t bytes, HostMemory from = HostMemory::kHugePageChunks);

// Releases what AllocateHostBuffer(bytes, from) returned; `bytes` and `from` must be the same.
// Null is a no-op. Freed space is reused by later buffers; a chunk left empty goes back to the
// system.
void FreeHostBuffer(void* data, size_t bytes, HostMemory from = HostMemory::kHugePageChunks);

// Bytes of chunks mapped now (whether or not buffers occupy them).
size_t HostArenaMappedBytes();

// What this process holds where, for reports: buffers in chunks (in whole 4 KiB pages), the
// chunks mapped, the process's anonymous memory backed by huge pages
// (/proc/self/smaps_rollup's AnonHugePages), and the kernel's transparent huge page mode
// ("always", "madvise" or "never"; "unknown" where /sys does not say).
struct HostMemoryUse {
  size_t chunk_bytes_used = 0;
  size_t chunk_bytes_mapped = 0;
  size_t huge_page_bytes = 0;
  std::string transparent_huge_pages;
};
HostMemoryUse ReadHostMemoryUse();

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_HOST_MEMORY_H_
