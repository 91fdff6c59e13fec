// Fibers for the kernel emulation: one stack per emulated CUDA thread and a switch between
// stacks that costs a few nanoseconds (x86-64: callee-saved registers only; other
// architectures: ucontext). Under ThreadSanitizer each fiber is also a TSan fiber, switched
// without implied synchronisation, so TSan sees the CUDA threads as concurrent.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_FIBER_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_FIBER_H_

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace splitspec::cuda_emulation {

// A saved execution context: the host thread's, or a fiber's.
struct Context {
#if defined(__x86_64__)
  void* stack_pointer = nullptr;
#else
  ucontext_t context;
#endif
  void* tsan_fiber = nullptr;  // TSan's handle (the host thread's own when not a fiber)
};

// A fiber: a stack and a context that starts in entry(argument). entry never returns.
class Fiber {
 public:
  Fiber(size_t stack_bytes, void (*entry)(void*), void* argument);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Forgets wherever the fiber was and makes its next resumption start entry(argument) afresh
  // (a kernel fault abandons the CUDA threads mid-kernel; their frames hold nothing to release).
  void Restart();
  Context& context() { return context_; }

 private:
  void* stack_ = nullptr;
  size_t stack_bytes_;
  void (*entry_)(void*);
  void* argument_;
  Context context_;
};

// The calling host thread's context, to switch back into from fibers.
void InitHostContext(Context& host);
// Saves the running context into `from` and resumes `to`.
void SwitchContext(Context& from, Context& to);

// ThreadSanitizer annotations (no-ops without SPLITSPEC_CUDA_EMULATION_TSAN).
void TsanAcquire(void* address);
void TsanRelease(void* address);

}  // namespace splitspec::cuda_emulation

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_FIBER_H_
