// Host buffers (common/engine/cpu/host_memory.h): alignment, zero fill, the huge page advice on
// chunk memory as the kernel records it (/proc/self/smaps), reuse of freed space, and chunks
// returned to the system when emptied.
#include "common/engine/cpu/host_memory.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/engine/backend.h"
#include "gtest/gtest.h"

namespace splitspec::engine::cpu {
namespace {

struct Mapping {
  uintptr_t start = 0, end = 0;
  std::string vm_flags;  // smaps' "VmFlags:" letters, e.g. "rd wr mr mw me ac hg"
};

// The mapping of this process that contains `address`, if any (start == end == 0 otherwise).
Mapping MappingContaining(const void* address) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  Mapping current, found;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (line.rfind("VmFlags:", 0) == 0) {
      if (found.end == 0 && current.start <= a && a < current.end) {
        found = current;
        found.vm_flags = line.substr(8);
      }
    } else if (fields >> std::hex >> start >> dash >> end && dash == '-') {
      current = {start, end, ""};
    }
  }
  return found;
}

bool HasFlag(const std::string& vm_flags, const std::string& flag) {
  std::istringstream words(vm_flags);
  std::string word;
  while (words >> word) {
    if (word == flag) return true;
  }
  return false;
}

// Whether this kernel was built with transparent huge pages: without them madvise refuses
// MADV_HUGEPAGE and no mapping carries the advice, which the chunks then do without.
bool KernelHasTransparentHugePages() {
  return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

bool AllZero(const uint8_t* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    if (data[i] != 0) return false;
  }
  return true;
}

TEST(HostMemoryTest, SmallBufferIsAlignedZeroedAndWritable) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, kArenaMinBytes - 1}) {
    auto* data = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
    ASSERT_NE(data, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % kHostAlignment, 0u) << bytes;
    EXPECT_TRUE(AllZero(data, bytes)) << bytes;
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i);
    FreeHostBuffer(data, bytes);
  }
}

TEST(HostMemoryTest, ChunkBuffersLieInMemoryAdvisedHugePages) {
  for (size_t bytes : {kArenaMinBytes, size_t{1181} << 10, 5 * kHugePageBytes + 123}) {
    auto* data = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
    ASSERT_NE(data, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 4096, 0u) << bytes;
    EXPECT_TRUE(AllZero(data, bytes)) << bytes;
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7);
    EXPECT_EQ(data[bytes - 1], static_cast<uint8_t>((bytes - 1) * 7));
    const Mapping first = MappingContaining(data);
    const Mapping last = MappingContaining(data + bytes - 1);
    ASSERT_NE(first.end, 0u);
    EXPECT_EQ(first.start, last.start) << "one mapping holds the buffer";
    EXPECT_EQ(HasFlag(first.vm_flags, "hg"), KernelHasTransparentHugePages()) << "VmFlags:" << first.vm_flags;
    FreeHostBuffer(data, bytes);
  }
}

TEST(HostMemoryTest, FreedSpaceIsReusedZeroedAndMergedWithItsNeighbours) {
  const size_t bytes = 3 * kArenaMinBytes + 5;
  const size_t spaced = (bytes + 4095) / 4096 * 4096;  // buffers in chunks end on base pages
  void* pin = AllocateHostBuffer(kArenaMinBytes);  // keeps the chunk mapped when a, b, c are freed
  auto* a = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
  auto* b = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
  auto* c = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
  ASSERT_TRUE(a != nullptr && b != nullptr && c != nullptr);
  std::memset(a, 0xab, bytes);
  std::memset(b, 0xcd, bytes);
  std::memset(c, 0xef, bytes);
  FreeHostBuffer(a, bytes);
  auto* again = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
  EXPECT_EQ(again, a) << "the first space that fits";
  EXPECT_TRUE(AllZero(again, bytes)) << "a reused space is zeroed";
  EXPECT_EQ(c[0], 0xef);
  EXPECT_EQ(c[bytes - 1], 0xef);

  // Freed neighbours merge: b then a (a joins the range after it) holds a buffer of both sizes;
  // then that buffer and c (c joins the range before it) one of all three.
  ASSERT_EQ(b, a + spaced) << "consecutive first fits are adjacent";
  ASSERT_EQ(c, b + spaced);
  FreeHostBuffer(b, bytes);
  FreeHostBuffer(again, bytes);
  auto* two = static_cast<uint8_t*>(AllocateHostBuffer(2 * spaced));
  EXPECT_EQ(two, a);
  EXPECT_TRUE(AllZero(two, 2 * spaced));
  EXPECT_EQ(c[0], 0xef);
  FreeHostBuffer(two, 2 * spaced);
  FreeHostBuffer(c, bytes);
  auto* three = static_cast<uint8_t*>(AllocateHostBuffer(3 * spaced));
  EXPECT_EQ(three, a);
  FreeHostBuffer(three, 3 * spaced);
  FreeHostBuffer(pin, kArenaMinBytes);
}

TEST(HostMemoryTest, AnEmptiedChunkGoesBackToTheSystem) {
  const size_t before = HostArenaMappedBytes();
  const size_t bytes = kArenaChunkBytes + 3 * 4096 + 5;  // more than a shared chunk: its own
  auto* data = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % kHugePageBytes, 0u) << "a chunk starts on a huge page";
  EXPECT_EQ(HostArenaMappedBytes(), before + kArenaChunkBytes + kHugePageBytes);
  data[0] = data[bytes - 1] = 1;
  FreeHostBuffer(data, bytes);
  EXPECT_EQ(HostArenaMappedBytes(), before);
  EXPECT_EQ(MappingContaining(data).end, 0u);
  EXPECT_EQ(MappingContaining(data + bytes - 1).end, 0u);
}

TEST(HostMemoryTest, GrowingAndFreeingBuffersKeepsTheMappingBounded) {
  // A workspace that grows one step at a time frees its old buffer each time: the chunk's
  // freed ranges merge, so the arena never maps more than the largest buffer needs.
  const size_t before = HostArenaMappedBytes();
  void* live = nullptr;
  size_t live_bytes = 0;
  for (size_t bytes = kArenaMinBytes; bytes <= 40 * kArenaMinBytes; bytes += kArenaMinBytes / 3) {
    void* grown = AllocateHostBuffer(bytes);
    ASSERT_NE(grown, nullptr);
    FreeHostBuffer(live, live_bytes);
    live = grown;
    live_bytes = bytes;
    EXPECT_LE(HostArenaMappedBytes(), before + kArenaChunkBytes) << bytes;
  }
  FreeHostBuffer(live, live_bytes);
}

TEST(HostMemoryTest, ThreadsAllocatingAtOnceGetDisjointBuffers) {
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> overwritten{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &overwritten] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t bytes = kArenaMinBytes * (1 + (t + round) % 5);
        auto* data = static_cast<uint8_t*>(AllocateHostBuffer(bytes));
        std::memset(data, t + 1, bytes);
        std::this_thread::yield();
        for (size_t i = 0; i < bytes; i += 512) overwritten += data[i] != t + 1;
        FreeHostBuffer(data, bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overwritten.load(), 0);
}

TEST(HostMemoryTest, CpuBackendHoldsMatricesInHugePageMemory) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    absl::StatusOr<Tensor> tensor = backend->Allocate(dtype, 768, 768);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    EXPECT_TRUE(AllZero(static_cast<const uint8_t*>(tensor->data), tensor->n_bytes()));
    EXPECT_EQ(HasFlag(MappingContaining(tensor->data).vm_flags, "hg"), KernelHasTransparentHugePages())
        << DTypeName(dtype);
    backend->Free(*tensor);
  }
}

TEST(HostMemoryTest, UseCountsBuffersInChunksAndNamesTheHugePageMode) {
  const HostMemoryUse before = ReadHostMemoryUse();
  const size_t bytes = 5 * kArenaMinBytes + 1;
  void* data = AllocateHostBuffer(bytes);
  ASSERT_NE(data, nullptr);
  const HostMemoryUse during = ReadHostMemoryUse();
  EXPECT_EQ(during.chunk_bytes_used, before.chunk_bytes_used + (bytes + 4095) / 4096 * 4096);
  EXPECT_GE(during.chunk_bytes_mapped, during.chunk_bytes_used);
  EXPECT_EQ(during.chunk_bytes_mapped, HostArenaMappedBytes());
  FreeHostBuffer(data, bytes);
  EXPECT_EQ(ReadHostMemoryUse().chunk_bytes_used, before.chunk_bytes_used);
  const std::string& mode = during.transparent_huge_pages;
  EXPECT_TRUE(mode == "always" || mode == "madvise" || mode == "never" || mode == "unknown") << mode;
  std::ifstream sys("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (std::getline(sys, line)) {
    EXPECT_NE(line.find("[" + mode + "]"), std::string::npos) << line;
  }
}

TEST(HostMemoryTest, CpuBackendWithoutChunksTakesTheCAllocatorsMemory) {
  CpuBackendOptions options;
  options.huge_page_chunks = false;
  std::unique_ptr<Backend> backend = CreateCpuBackend(options);
  const size_t mapped = HostArenaMappedBytes();
  absl::StatusOr<Tensor> tensor = backend->Allocate(DType::kF32, 768, 768);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(HostArenaMappedBytes(), mapped);
  EXPECT_FALSE(HasFlag(MappingContaining(tensor->data).vm_flags, "hg"));
  EXPECT_TRUE(AllZero(static_cast<const uint8_t*>(tensor->data), tensor->n_bytes()));
  backend->Free(*tensor);
}

}  // namespace
}  // namespace splitspec::engine::cpu
