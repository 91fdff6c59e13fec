// Emulation build only: <cuda_runtime_api.h> resolves here instead of the CUDA toolkit (see kernel_model.h).
#pragma once
#include "common/engine/cuda/emulation/kernel_model.h"
