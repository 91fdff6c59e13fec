// Emulation build only: <cublas_v2.h> resolves here instead of the CUDA toolkit (see cublas_api.h).
#pragma once
#include "common/engine/cuda/emulation/cublas_api.h"
