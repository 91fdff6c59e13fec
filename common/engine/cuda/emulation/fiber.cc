// Fiber stacks and context switches (see fiber.h).
#include "common/engine/cuda/emulation/fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__x86_64__)
// splitspec_emulation_switch(&from_sp, to_sp): pushes the callee-saved registers, saves the
// stack pointer, loads the other one and pops that context's registers. Floating-point control
// state is never changed by the kernels, so it is not saved.
// splitspec_emulation_fiber_start: where a new fiber's first switch "returns" to; it calls
// r13(r12) with the stack 16-byte aligned as the ABI wants.
extern "C" void splitspec_emulation_switch(void** save_stack_pointer, void* load_stack_pointer);
extern "C" void splitspec_emulation_fiber_start();
asm(R"(
  .text
  .globl splitspec_emulation_switch
  .type splitspec_emulation_switch, @function
splitspec_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size splitspec_emulation_switch, .-splitspec_emulation_switch

  .globl splitspec_emulation_fiber_start
  .type splitspec_emulation_fiber_start, @function
splitspec_emulation_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size splitspec_emulation_fiber_start, .-splitspec_emulation_fiber_start
)");
#endif

namespace splitspec::cuda_emulation {

Fiber::Fiber(size_t stack_bytes, void (*entry)(void*), void* argument)
    : stack_bytes_(stack_bytes), entry_(entry), argument_(argument) {
  // Reserved, committed on first touch: a thousand fibers cost only the pages they use.
  stack_ = mmap(nullptr, stack_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stack_ == MAP_FAILED) {
    std::perror("cuda emulation: mmap of a fiber stack");
    std::abort();
  }
  mprotect(stack_, 4096, PROT_NONE);  // guard page: an overflow faults instead of corrupting
  Restart();
}

Fiber::~Fiber() {
#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
  __tsan_destroy_fiber(context_.tsan_fiber);
#endif
  munmap(stack_, stack_bytes_);
}

void Fiber::Restart() {
#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
  // A fresh TSan fiber too: the abandoned one's shadow call stack still holds the old frames.
  if (context_.tsan_fiber != nullptr) __tsan_destroy_fiber(context_.tsan_fiber);
  context_.tsan_fiber = __tsan_create_fiber(0);
#endif
#if defined(__x86_64__)
  auto top = (reinterpret_cast<uintptr_t>(stack_) + stack_bytes_) & ~uintptr_t{15};
  // Seven slots popped by the switch: r15 r14 r13 r12 rbx rbp, return address. After them the
  // stack pointer is 16-byte aligned for fiber_start's call.
  auto* slots = reinterpret_cast<void**>(top - 72);
  slots[0] = nullptr;                                              // r15
  slots[1] = nullptr;                                              // r14
  slots[2] = reinterpret_cast<void*>(entry_);                      // r13
  slots[3] = argument_;                                            // r12
  slots[4] = nullptr;                                              // rbx
  slots[5] = nullptr;                                              // rbp
  slots[6] = reinterpret_cast<void*>(&splitspec_emulation_fiber_start);  // return address
  context_.stack_pointer = slots;
#else
  getcontext(&context_.context);
  context_.context.uc_stack.ss_sp = static_cast<char*>(stack_) + 4096;
  context_.context.uc_stack.ss_size = stack_bytes_ - 4096;
  context_.context.uc_link = nullptr;
  // makecontext passes int arguments only: split the pointer in two halves.
  const auto bits = reinterpret_cast<uintptr_t>(argument_);
  using Trampoline = void (*)(unsigned, unsigned, unsigned, unsigned);
  static Trampoline trampoline = [](unsigned entry_lo, unsigned entry_hi, unsigned arg_lo, unsigned arg_hi) {
    auto entry = reinterpret_cast<void (*)(void*)>((uintptr_t{entry_hi} << 32) | entry_lo);
    entry(reinterpret_cast<void*>((uintptr_t{arg_hi} << 32) | arg_lo));
  };
  const auto entry_bits = reinterpret_cast<uintptr_t>(entry_);
  makecontext(&context_.context, reinterpret_cast<void (*)()>(trampoline), 4, static_cast<unsigned>(entry_bits),
              static_cast<unsigned>(entry_bits >> 32), static_cast<unsigned>(bits), static_cast<unsigned>(bits >> 32));
#endif
}

void InitHostContext(Context& host) {
#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
  host.tsan_fiber = __tsan_get_current_fiber();
#else
  (void)host;
#endif
}

void SwitchContext(Context& from, Context& to) {
#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
  // No implied happens-before: only CUDA's own synchronisation orders the CUDA threads.
  __tsan_switch_to_fiber(to.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
  splitspec_emulation_switch(&from.stack_pointer, to.stack_pointer);
#else
  swapcontext(&from.context, &to.context);
#endif
}

void TsanAcquire(void* address) {
#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
  __tsan_acquire(address);
#else
  (void)address;
#endif
}

void TsanRelease(void* address) {
#if defined(SPLITSPEC_CUDA_EMULATION_TSAN)
  __tsan_release(address);
#else
  (void)address;
#endif
}

}  // namespace splitspec::cuda_emulation
