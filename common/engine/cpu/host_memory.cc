// The chunks are a first-fit allocator: each keeps its free ranges by offset, merged with
// their neighbours when a buffer is freed. Allocation happens when models, caches and
// workspaces are made or grow, never per step, so one lock and a linear search are enough.
#include "common/engine/cpu/host_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPLITSPEC_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SPLITSPEC_ASAN 1
#endif
#ifdef SPLITSPEC_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace splitspec::engine::cpu {
namespace {

constexpr size_t kGranule = 4096;  // buffers in chunks start and end on base pages

size_t RoundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// AddressSanitizer cannot see inside our chunks; marking what no buffer holds as poisoned keeps
// overruns and use after free detected there as they are in the C allocator's memory.
#ifdef SPLITSPEC_ASAN
void Poison(const void* data, size_t bytes) { ASAN_POISON_MEMORY_REGION(data, bytes); }
void Unpoison(const void* data, size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(data, bytes); }
#else
void Poison(const void*, size_t) {}
void Unpoison(const void*, size_t) {}
#endif

// Maps `length` bytes (a multiple of kHugePageBytes) at a kHugePageBytes boundary:
// over-reserve by one huge page, then unmap what lies before the boundary and after the end.
uint8_t* MapAlignedToHugePage(size_t length) {
  const size_t reserved = length + kHugePageBytes;
  void* raw = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(start, kHugePageBytes);
  const size_t head = aligned - start;
  const size_t tail = reserved - head - length;
  if (head > 0) munmap(raw, head);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  // Advice only: without transparent huge page support the chunk keeps base pages.
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(aligned);
}

class ChunkArena {
 public:
  // Never destroyed: buffers may be freed by other objects' destructors after exit begins.
  static ChunkArena& Get() {
    static ChunkArena* arena = new ChunkArena;
    return *arena;
  }

  void* Allocate(size_t bytes) {
    const size_t length = RoundUp(bytes, kGranule);
    std::lock_guard<std::mutex> lock(mu_);
    uint8_t* data = TakeFirstFit(length);
    if (data == nullptr && AddChunk(length)) data = TakeFirstFit(length);
    if (data == nullptr) return nullptr;
    // Whole cache lines, as the C allocator path gives: vector loops may read a row's last line.
    const size_t usable = RoundUp(bytes, kHostAlignment);
    Unpoison(data, usable);
    std::memset(data, 0, usable);  // freed space is reused, so it may hold an old buffer's bytes
    return data;
  }

  void Free(void* data, size_t bytes) {
    const size_t length = RoundUp(bytes, kGranule);
    std::lock_guard<std::mutex> lock(mu_);
    auto chunk_it = std::prev(chunks_.upper_bound(reinterpret_cast<uintptr_t>(data)));
    Chunk& chunk = chunk_it->second;
    Poison(data, length);
    ReturnRange(chunk, static_cast<size_t>(static_cast<uint8_t*>(data) - chunk.base), length);
    chunk.used -= length;
    if (chunk.used == 0) {
      Unpoison(chunk.base, chunk.length);  // the next mapping here may be someone else's
      munmap(chunk.base, chunk.length);
      mapped_bytes_ -= chunk.length;
      chunks_.erase(chunk_it);
    }
  }

  size_t MappedBytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return mapped_bytes_;
  }

  size_t UsedBytes() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t used = 0;
    for (const auto& [address, chunk] : chunks_) used += chunk.used;
    return used;
  }

 private:
  struct Chunk {
    uint8_t* base = nullptr;
    size_t length = 0;
    size_t used = 0;
    std::map<size_t, size_t> free;  // offset -> length, disjoint and never adjacent
  };

  uint8_t* TakeFirstFit(size_t length) {
    for (auto& [address, chunk] : chunks_) {
      for (auto it = chunk.free.begin(); it != chunk.free.end(); ++it) {
        if (it->second < length) continue;
        const size_t offset = it->first, rest = it->second - length;
        chunk.free.erase(it);
        if (rest > 0) chunk.free.emplace(offset + length, rest);
        chunk.used += length;
        return chunk.base + offset;
      }
    }
    return nullptr;
  }

  bool AddChunk(size_t length) {
    const size_t chunk_length = std::max(kArenaChunkBytes, RoundUp(length, kHugePageBytes));
    uint8_t* base = MapAlignedToHugePage(chunk_length);
    if (base == nullptr) return false;
    Poison(base, chunk_length);
    Chunk& chunk = chunks_[reinterpret_cast<uintptr_t>(base)];
    chunk.base = base;
    chunk.length = chunk_length;
    chunk.free.emplace(0, chunk_length);
    mapped_bytes_ += chunk_length;
    return true;
  }

  // Puts [offset, offset + length) back among the chunk's free ranges, merged with neighbours.
  static void ReturnRange(Chunk& chunk, size_t offset, size_t length) {
    auto next = chunk.free.lower_bound(offset);
    if (next != chunk.free.end() && offset + length == next->first) {
      length += next->second;
      next = chunk.free.erase(next);
    }
    if (next != chunk.free.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == offset) {
        before->second += length;
        return;
      }
    }
    chunk.free.emplace_hint(next, offset, length);
  }

  std::mutex mu_;
  std::map<uintptr_t, Chunk> chunks_;  // by base address, to find a freed buffer's chunk
  size_t mapped_bytes_ = 0;
};

// The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
std::string TransparentHugePageMode() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string word;
  while (file >> word) {
    if (word.size() > 2 && word.front() == '[' && word.back() == ']') return word.substr(1, word.size() - 2);
  }
  return "unknown";
}

size_t AnonHugePageBytes() {
  std::ifstream file("/proc/self/smaps_rollup");
  std::string key;
  size_t kib = 0;
  while (file >> key) {
    if (key == "AnonHugePages:" && file >> kib) return kib * 1024;
  }
  return 0;
}

bool FromChunks(size_t bytes, HostMemory from) {
  return from == HostMemory::kHugePageChunks && bytes >= kArenaMinBytes;
}

}  // namespace

void* AllocateHostBuffer(size_t bytes, HostMemory from) {
  bytes = std::max<size_t>(bytes, 1);
  if (FromChunks(bytes, from)) return ChunkArena::Get().Allocate(bytes);
  const size_t rounded = RoundUp(bytes, kHostAlignment);
  void* data = std::aligned_alloc(kHostAlignment, rounded);
  if (data != nullptr) std::memset(data, 0, rounded);
  return data;
}

void FreeHostBuffer(void* data, size_t bytes, HostMemory from) {
  if (data == nullptr) return;
  bytes = std::max<size_t>(bytes, 1);
  if (FromChunks(bytes, from)) {
    ChunkArena::Get().Free(data, bytes);
  } else {
    std::free(data);
  }
}

size_t HostArenaMappedBytes() { return ChunkArena::Get().MappedBytes(); }

HostMemoryUse ReadHostMemoryUse() {
  HostMemoryUse use;
  use.chunk_bytes_used = ChunkArena::Get().UsedBytes();
  use.chunk_bytes_mapped = HostArenaMappedBytes();
  use.huge_page_bytes = AnonHugePageBytes();
  use.transparent_huge_pages = TransparentHugePageMode();
  return use;
}

}  // namespace splitspec::engine::cpu
