// For the tests built once per x86-64 instruction-set path (tests/unit/engine/CMakeLists.txt,
// add_instruction_set_path_tests): whether this CPU can run the path the binary was built for.
#ifndef SPLITSPEC_TESTS_UNIT_ENGINE_INSTRUCTION_SET_PATH_H_
#define SPLITSPEC_TESTS_UNIT_ENGINE_INSTRUCTION_SET_PATH_H_

namespace splitspec::engine {

inline bool CpuRunsThisBuild() {
#if defined(__AVX2__)
  // Every CPU with AVX2 and FMA has F16C (which clang's __builtin_cpu_supports cannot name).
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return true;
#endif
}

}  // namespace splitspec::engine

#endif  // SPLITSPEC_TESTS_UNIT_ENGINE_INSTRUCTION_SET_PATH_H_
