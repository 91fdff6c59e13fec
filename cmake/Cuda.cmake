# The optional CUDA backend. SPLITSPEC_CUDA: AUTO (default) builds it when CMake finds a CUDA
# toolkit, ON requires one, OFF never builds it. Without it every CPU target builds as before.
# Sets SPLITSPEC_CUDA_ENABLED, and NCCL_INCLUDE_DIR / NCCL_LIBRARY when NCCL is found.
set(SPLITSPEC_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE SPLITSPEC_CUDA PROPERTY STRINGS AUTO ON OFF)

set(SPLITSPEC_CUDA_ENABLED OFF)
if(SPLITSPEC_CUDA STREQUAL "AUTO" OR SPLITSPEC_CUDA)
  # The toolkit's usual home is not always on PATH (CI images); check_language honours CUDACXX.
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # A100 (sm_80, SASS only) and H100 (sm_90, SASS + PTX for newer parts). `native` would
    # fail on build machines without a GPU.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(SPLITSPEC_CUDA_ENABLED ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
    message(STATUS "splitspec: CUDA backend ON (${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}), "
                   "NCCL: ${NCCL_LIBRARY}")
  elseif(NOT SPLITSPEC_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "SPLITSPEC_CUDA=${SPLITSPEC_CUDA} but no CUDA compiler was found")
  else()
    message(STATUS "splitspec: no CUDA toolkit found; the CUDA backend is not built")
  endif()
endif()

# The CPU emulation of the CUDA backend (common/engine/cuda/emulation): the backend's kernels,
# cuBLAS calls and host code built as plain C++ and run by the conformance tests on machines
# without a GPU (or a toolkit). A test harness only; no binary serves with it.
option(SPLITSPEC_CUDA_EMULATION "Build the CUDA backend over the CPU emulation, for tests" ON)
