// Runs emulated kernel launches: validates the launch configuration as a GPU does, then runs
// each block's CUDA threads as fibers, switching at barriers and warp collectives
// (kernel_model.h describes the model). Compiled without TSan instrumentation: this
// bookkeeping is shared by all fibers by design; the happens-before edges CUDA defines are
// handed to TSan explicitly.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/engine/cuda/emulation/fiber.h"
#include "common/engine/cuda/emulation/kernel_model.h"

namespace splitspec::cuda_emulation {
namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr size_t kMaxDynamicSharedBytes = 48 * 1024;  // without the opt-in attribute
constexpr size_t kFiberStackBytes = 256 * 1024;

enum class ThreadState { kReady, kRunning, kAtBarrier, kAtWarpCollective, kExited };

struct CudaThread {
  std::unique_ptr<Fiber> fiber;
  uint3 index{};
  int linear = 0;
  ThreadState state = ThreadState::kExited;
};

struct WarpState {
  unsigned existing = 0;  // lanes present in the block
  unsigned live = 0;      // lanes that have not exited
  unsigned arrived = 0;   // lanes waiting in the pending collective
  unsigned op_mask = 0;   // the mask that collective names
  WarpOp op = WarpOp::kSync;
  int param = 0;
  int width = 32;
  uint64_t in[32] = {};
  uint64_t out[32] = {};
  unsigned sync_generation = 0;
  char sync_objects[2] = {};  // TSan sync addresses for __syncwarp, alternating by generation
};

// One host thread's emulated device: its fibers and the block they are running.
class Executor {
 public:
  Executor() { InitHostContext(host_); }

  cudaError_t Run(const KernelLaunch& launch);

  // Called on the running CUDA thread's fiber.
  uint3 thread_idx() const { return current_->index; }
  uint3 block_idx() const { return block_idx_; }
  dim3 block_dim() const { return launch_->block; }
  dim3 grid_dim() const { return launch_->grid; }
  void* dynamic_shared() { return shared_.data(); }
  void Barrier();
  uint64_t Collective(WarpOp op, unsigned mask, uint64_t value, int param, int width);
  [[noreturn]] void Fault(const std::string& what);
  bool running() const { return current_ != nullptr; }

 private:
  static void FiberMain(void* self);
  void RunBlock();
  void Resume(CudaThread& thread);
  void Yield();
  void ThreadExited(CudaThread& thread);
  void ReleaseBarrier();
  void CompleteCollective(WarpState& warp, int warp_index);
  std::string DescribeDeadlock() const;

  Context host_;
  std::vector<std::unique_ptr<CudaThread>> threads_;  // stable addresses: each fiber holds its own
  int n_threads_ = 0;
  int live_ = 0;
  int at_barrier_ = 0;
  unsigned barrier_generation_ = 0;
  char barrier_objects_[2] = {};
  char start_object_ = 0;
  char end_object_ = 0;
  std::vector<WarpState> warps_;
  std::vector<float4> shared_;  // dynamic shared memory, 16-byte aligned
  uint3 block_idx_{};
  const KernelLaunch* launch_ = nullptr;
  CudaThread* current_ = nullptr;
  bool faulted_ = false;
  std::string fault_;
};

// Launches are serialised process-wide: one block runs at a time, which is what makes a
// function-local static a block's __shared__ variable.
std::mutex& LaunchMutex() {
  static std::mutex mutex;
  return mutex;
}

Executor& ThisThreadExecutor() {
  thread_local Executor executor;
  return executor;
}

Executor* g_running = nullptr;  // the executor whose block is running (under LaunchMutex)

Executor& Running() {
  if (g_running == nullptr || !g_running->running()) {
    std::fprintf(stderr, "cuda emulation: device code called outside a kernel launch\n");
    std::abort();
  }
  return *g_running;
}

cudaError_t ValidateConfiguration(const KernelLaunch& launch) {
  const dim3& b = launch.block;
  const dim3& g = launch.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || b.x > 1024 || b.y > 1024 || b.z > 64) {
    return cudaErrorInvalidConfiguration;
  }
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
    return cudaErrorInvalidConfiguration;
  }
  if (launch.dynamic_shared_bytes > kMaxDynamicSharedBytes) return cudaErrorInvalidValue;
  if (launch.run_thread == nullptr) return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t Executor::Run(const KernelLaunch& launch) {
  launch_ = &launch;
  n_threads_ = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  while (static_cast<int>(threads_.size()) < n_threads_) {
    auto thread = std::make_unique<CudaThread>();
    thread->linear = static_cast<int>(threads_.size());
    thread->fiber = std::make_unique<Fiber>(kFiberStackBytes, &Executor::FiberMain, thread.get());
    threads_.push_back(std::move(thread));
  }
  shared_.assign((launch.dynamic_shared_bytes + sizeof(float4) - 1) / sizeof(float4), float4{});
  faulted_ = false;
  const dim3 grid = launch.grid;
  for (unsigned z = 0; z < grid.z && !faulted_; ++z) {
    for (unsigned y = 0; y < grid.y && !faulted_; ++y) {
      for (unsigned x = 0; x < grid.x && !faulted_; ++x) {
        block_idx_ = uint3{x, y, z};
        RunBlock();
      }
    }
  }
  launch_ = nullptr;
  if (!faulted_) return cudaSuccess;
  SetStickyError(fault_.c_str());
  for (auto& thread : threads_) thread->fiber->Restart();
  return cudaErrorLaunchFailure;
}

void Executor::RunBlock() {
  const dim3 b = launch_->block;
  const int n_warps = (n_threads_ + 31) / 32;
  warps_.assign(n_warps, WarpState{});
  for (int i = 0; i < n_threads_; ++i) {
    CudaThread& thread = *threads_[i];
    thread.index = uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
    thread.state = ThreadState::kReady;
    warps_[i / 32].existing |= 1u << (i % 32);
  }
  for (WarpState& warp : warps_) warp.live = warp.existing;
  // Uninitialised shared memory reads as NaN, not as a convenient zero.
  std::memset(static_cast<void*>(shared_.data()), 0xff, shared_.size() * sizeof(float4));
  live_ = n_threads_;
  at_barrier_ = 0;
  TsanRelease(&start_object_);
  while (live_ > 0 && !faulted_) {
    bool progressed = false;
    for (int i = 0; i < n_threads_ && !faulted_; ++i) {
      if (threads_[i]->state == ThreadState::kReady) {
        Resume(*threads_[i]);
        progressed = true;
      }
    }
    if (!progressed && live_ > 0 && !faulted_) {
      faulted_ = true;
      fault_ = DescribeDeadlock();
    }
  }
  TsanAcquire(&end_object_);
}

void Executor::FiberMain(void* self) {
  auto* thread = static_cast<CudaThread*>(self);
  for (;;) {
    Executor& executor = ThisThreadExecutor();
    TsanAcquire(&executor.start_object_);
    executor.launch_->run_thread(executor.launch_->payload);
    executor.ThreadExited(*thread);  // switches away; resumed at the next block's start
  }
}

void Executor::Resume(CudaThread& thread) {
  thread.state = ThreadState::kRunning;
  current_ = &thread;
  g_running = this;
  SwitchContext(host_, thread.fiber->context());
  current_ = nullptr;
}

void Executor::Yield() {
  CudaThread& thread = *current_;
  SwitchContext(thread.fiber->context(), host_);
  // Resumed by the scheduler (which set current_ back to this thread).
}

void Executor::ThreadExited(CudaThread& thread) {
  TsanRelease(&end_object_);
  thread.state = ThreadState::kExited;
  --live_;
  WarpState& warp = warps_[thread.linear / 32];
  const unsigned bit = 1u << (thread.linear % 32);
  warp.live &= ~bit;
  if (warp.arrived != 0 && (warp.op_mask & bit)) {
    Fault("thread " + std::to_string(thread.linear) +
          " exited while lanes of its warp wait for it in a warp collective that names it");
  }
  if (at_barrier_ > 0 && at_barrier_ == live_) ReleaseBarrier();
  Yield();
}

void Executor::Barrier() {
  CudaThread& thread = *current_;
  const unsigned generation = barrier_generation_;
  TsanRelease(&barrier_objects_[generation & 1]);
  ++at_barrier_;
  if (at_barrier_ == live_) {
    ReleaseBarrier();
  } else {
    thread.state = ThreadState::kAtBarrier;
    Yield();
  }
  TsanAcquire(&barrier_objects_[generation & 1]);
}

void Executor::ReleaseBarrier() {
  at_barrier_ = 0;
  ++barrier_generation_;
  for (int i = 0; i < n_threads_; ++i) {
    if (threads_[i]->state == ThreadState::kAtBarrier) threads_[i]->state = ThreadState::kReady;
  }
}

uint64_t Executor::Collective(WarpOp op, unsigned mask, uint64_t value, int param, int width) {
  CudaThread& thread = *current_;
  const int warp_index = thread.linear / 32;
  const int lane = thread.linear % 32;
  const unsigned bit = 1u << lane;
  WarpState& warp = warps_[warp_index];
  if ((mask & bit) == 0) Fault("a lane called a warp collective whose mask does not name it");
  if ((mask & ~warp.existing) != 0) Fault("a warp collective's mask names lanes the block does not have");
  if ((mask & ~warp.live) != 0) Fault("a warp collective's mask names lanes that already exited");
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) Fault("warp collective width is not a power of two <= 32");
  if (warp.arrived == 0) {
    warp.op = op;
    warp.op_mask = mask;
    warp.param = param;
    warp.width = width;
  } else if (warp.op != op || warp.op_mask != mask || warp.width != width ||
             ((op == WarpOp::kShflUp || op == WarpOp::kShflDown || op == WarpOp::kShflXor) && warp.param != param)) {
    Fault("lanes of one warp met at different warp collectives (divergent shuffles)");
  }
  const unsigned generation = warp.sync_generation;
  if (op == WarpOp::kSync) TsanRelease(&warp.sync_objects[generation & 1]);
  warp.in[lane] = value;
  warp.arrived |= bit;
  if (warp.arrived == warp.op_mask) {
    CompleteCollective(warp, warp_index);
  } else {
    thread.state = ThreadState::kAtWarpCollective;
    Yield();
  }
  if (op == WarpOp::kSync) TsanAcquire(&warp.sync_objects[generation & 1]);
  return warp.out[lane];
}

void Executor::CompleteCollective(WarpState& warp, int warp_index) {
  const unsigned mask = warp.op_mask;
  uint64_t ballot = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if ((mask >> lane & 1u) && warp.in[lane] != 0) ballot |= uint64_t{1} << lane;
  }
  for (int lane = 0; lane < 32; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    const int segment = lane / warp.width * warp.width;
    int source = lane;
    switch (warp.op) {
      case WarpOp::kShflIdx: source = segment + ((warp.param % warp.width) + warp.width) % warp.width; break;
      case WarpOp::kShflUp: source = lane - segment >= warp.param ? lane - warp.param : lane; break;
      case WarpOp::kShflDown: source = lane - segment + warp.param < warp.width ? lane + warp.param : lane; break;
      case WarpOp::kShflXor: {
        const int target = lane ^ warp.param;
        source = target < segment + warp.width ? target : lane;
        break;
      }
      case WarpOp::kBallot:
      case WarpOp::kSync: break;
    }
    if (source < 0 || source >= 32 || (mask >> source & 1u) == 0) {
      Fault("a shuffle reads a lane that is not in its mask (undefined on a GPU)");
    }
    warp.out[lane] = warp.op == WarpOp::kBallot ? ballot : warp.in[source];
  }
  warp.arrived = 0;
  ++warp.sync_generation;
  for (int lane = 0; lane < 32; ++lane) {
    const int i = warp_index * 32 + lane;
    if ((mask >> lane & 1u) && i < n_threads_ && threads_[i]->state == ThreadState::kAtWarpCollective) {
      threads_[i]->state = ThreadState::kReady;
    }
  }
}

std::string Executor::DescribeDeadlock() const {
  int at_barrier = 0, at_collective = 0;
  for (int i = 0; i < n_threads_; ++i) {
    at_barrier += threads_[i]->state == ThreadState::kAtBarrier;
    at_collective += threads_[i]->state == ThreadState::kAtWarpCollective;
  }
  return "deadlock: " + std::to_string(at_barrier) + " thread(s) wait at __syncthreads and " +
         std::to_string(at_collective) + " at warp collectives that the others never reach";
}

void Executor::Fault(const std::string& what) {
  const CudaThread& thread = *current_;
  faulted_ = true;
  fault_ = "kernel fault in block (" + std::to_string(block_idx_.x) + "," + std::to_string(block_idx_.y) + "," +
           std::to_string(block_idx_.z) + ") thread (" + std::to_string(thread.index.x) + "," +
           std::to_string(thread.index.y) + "," + std::to_string(thread.index.z) + "): " + what;
  // Abandon this CUDA thread: the scheduler stops the launch and restarts every fiber.
  SwitchContext(current_->fiber->context(), host_);
  std::abort();  // never resumed
}

}  // namespace

uint3 ThreadIdx() { return Running().thread_idx(); }
uint3 BlockIdx() { return Running().block_idx(); }
dim3 BlockDim() { return Running().block_dim(); }
dim3 GridDim() { return Running().grid_dim(); }
void BlockBarrier() { Running().Barrier(); }
uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int param, int width) {
  return Running().Collective(op, mask, value, param, width);
}
void* DynamicSharedBase() { return Running().dynamic_shared(); }
void KernelFault(const char* what) { Running().Fault(what); }

cudaError_t RunKernel(const KernelLaunch& launch) {
  const cudaError_t config = ValidateConfiguration(launch);
  if (config != cudaSuccess) return config;
  std::lock_guard<std::mutex> lock(LaunchMutex());
  Executor& executor = ThisThreadExecutor();
  Executor* previous = g_running;
  const cudaError_t result = executor.Run(launch);
  g_running = previous;
  return result;
}

}  // namespace splitspec::cuda_emulation
