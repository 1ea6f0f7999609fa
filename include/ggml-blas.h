#pragma once

// loom: the BLAS backend. Matrix products (GGML_OP_MUL_MAT, GGML_OP_OUT_PROD)
// computed with a CBLAS library (OpenBLAS), on host memory shared with the
// CPU backend.
//
// The device ("BLAS", type GGML_BACKEND_DEVICE_TYPE_ACCEL) uses the CPU's
// buffer type, so a scheduler given [BLAS, CPU] moves products onto BLAS
// without copying their operands. Its supports_op and offload_op take only
// the products measured to be faster there than on the CPU (thresholds on
// the batch size, the columns of src1, and on the matrix sizes, per weight
// type: see src/backends/blas/policy.h and bench/RESULTS.md), and products
// the CPU cannot compute. LOOM_BLAS_MIN_BATCH=<n>, read once when the device
// is first used, replaces those thresholds with one: every product it can
// compute with at least n columns (1: every product).
//
// Weights of type F16, BF16 and the quantized types are converted to F32,
// a panel of rows at a time, into a work buffer of the backend.
//
// Built when CMake finds OpenBLAS (option LOOM_BLAS); the functions below
// then exist and the family is in the registry before the CPU.

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// A new BLAS backend, freed with ggml_backend_free; NULL (logged) when out
// of memory. Its conversion threads start at its first conversion.
GGML_BACKEND_API ggml_backend_t ggml_backend_blas_init(void);

GGML_BACKEND_API bool ggml_backend_is_blas(ggml_backend_t backend);

// Threads used to convert weights to F32 and, with OpenBLAS, by the BLAS
// library itself (a setting of the whole process, applied at each
// computation of this backend). backend_blas must be a BLAS backend and
// n_threads in 1..GGML_MAX_N_THREADS. Not to be called while the backend
// computes.
GGML_BACKEND_API void ggml_backend_blas_set_n_threads(ggml_backend_t backend_blas, int n_threads);

// The BLAS backend family (one device); lives for the whole process.
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_blas_reg(void);

#ifdef __cplusplus
}
#endif
