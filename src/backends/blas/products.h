#pragma once

// GGML_OP_MUL_MAT and GGML_OP_OUT_PROD as CBLAS sgemm calls.
//
// Both ops are, for each matrix of the batch dimensions 2 and 3 (src0
// broadcast over src1 by whole factors),
//     C (N x M) = op(B) (N x K) * op(A) (K x M)
// with C the destination (row n at dst + n * nb1), B from src1 and A from
// src0:
//   mul_mat:  A(k, m) = src0[k, m], B(n, k) = src1[k, n]; M = ne01, K = ne00, N = ne11
//   out_prod: A(k, m) = src0[m, k], B(n, k) = src1[n, k]; M = ne00, K = ne01, N = ne10
// BLAS addresses a matrix through one unit stride and one leading
// dimension, so any operand with a unit stride in either direction is used
// in place (transposed or not); src0 of another type than F32 is converted
// to F32 first, a panel of rows (along its dimension 0) at a time, each
// panel in parallel.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ggml.h"

namespace loom::blas {

class WorkerPool;

// The sizes of the products op performs, per matrix of dimensions 2 and 3.
struct GemmSize {
    int64_t m = 0, n = 0, k = 0;
};
GemmSize gemm_size(const ggml_tensor * op);

// Whether compute_product can compute op, whatever its size: the op is a
// product, the types have an F32 path and every operand can be addressed
// by BLAS (32-bit sizes, unit strides). op must have its shapes set (an op
// built by ggml_mul_mat / ggml_out_prod).
bool can_compute(const ggml_tensor * op);

// The state a backend keeps between products: the threads that convert
// src0 and the buffer it is converted into, grown as needed.
class ProductWorkspace {
  public:
    ProductWorkspace();
    ~ProductWorkspace();
    ProductWorkspace(const ProductWorkspace &)             = delete;
    ProductWorkspace & operator=(const ProductWorkspace &) = delete;

    // Threads for conversions and for the BLAS library (1..GGML_MAX_N_THREADS);
    // takes effect at the next product.
    void set_n_threads(int n) { n_threads_ = n; }
    int  n_threads() const { return n_threads_; }

    // Computes op (can_compute(op) must hold). GGML_STATUS_ALLOC_FAILED
    // (logged) when the conversion buffer cannot be allocated,
    // GGML_STATUS_FAILED (logged) when the threads cannot be started.
    ggml_status compute_product(ggml_tensor * op);

  private:
    float * conversion_buffer(size_t n_floats);
    bool    ensure_pool();
    // Rows [first_row, first_row + n_rows) of matrix (i2, i3) of t, to dense F32 rows at out.
    void    convert_rows(const ggml_tensor * t, int64_t i2, int64_t i3, int64_t first_row, int64_t n_rows, float * out);

    int                         n_threads_;
    std::unique_ptr<WorkerPool> pool_;
    std::unique_ptr<float[]>    work_;
    size_t                      work_floats_ = 0;
};

// The BLAS library's own thread count (OpenBLAS: a setting of the whole
// process); ignored by libraries without one.
void set_library_threads(int n_threads);

// "OpenBLAS", or "CBLAS" for another implementation of the interface.
const char * library_name();

} // namespace loom::blas
