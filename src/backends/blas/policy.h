#pragma once

// Which products the BLAS device takes: those measured to run faster
// through BLAS than with the CPU backend's own kernels.
//
// Note [BLAS threshold]
// The CPU backend multiplies quantized weights with integer dot products,
// each weight read once per group of columns, and F32/F16/BF16 weights with
// its own blocked GEMM; BLAS first converts the weights to F32 (for types
// other than F32), then calls sgemm. The conversion is one pass over the
// weights whatever the batch, so BLAS can only win once the batch N (the
// columns of src1: the tokens of a prompt) amortises it. The thresholds come
// from bench/bench_blas (bench/RESULTS.md, section "BLAS backend"): for each
// type, the smallest N from which BLAS was faster at every larger N on
// weights of 1024 and 4096 rows, in one-thread and two-thread runs. On the
// machine measured (Debian's OpenBLAS 0.3.21, which runs its AVX2 kernels on
// that AVX-512 CPU):
//   - Q4_0 weights from N = 64: x1.1 to x1.5 against the CPU's AVX2 kernels;
//     never where the CPU runs its AVX-512 VNNI table, whose integer
//     products of 4 columns at a time were 2 to 5 times faster than BLAS at
//     every N (section "CPU backend: AVX-512 VNNI" of bench/RESULTS.md);
//   - Q8_0, F32 and BF16 weights: BLAS within about 10 % of the CPU at every
//     N (Q8_0 up to x1.2 on 1024 rows, none on 4096), F16 slower at every N
//     (its conversion to F32 is scalar): not taken, as an even trade is lost
//     to the switches between backends. Other quantized types, not measured,
//     are treated as Q8_0;
//   - out_prod from N = 8: x2 to x6 (the CPU kernel is not blocked);
//   - M and K of at least 256 for mul_mat (below, a product takes
//     microseconds and switching backends costs more; attention's products,
//     with K = 128, ran slower on BLAS at every N), 64 for out_prod.
// A product the CPU backend cannot compute at all (a weight type without a
// CPU kernel) is taken at any size: BLAS is then the only place for it.
// LOOM_BLAS_MIN_BATCH replaces all of this with one batch threshold and no
// size threshold (see ggml-blas.h), to re-measure or to test.

#include <cstdint>
#include <limits>

#include "ggml.h"

namespace loom::blas {

struct Policy {
    static constexpr int64_t never = std::numeric_limits<int64_t>::max();

    // Smallest N of mul_mat by type of src0.
    int64_t min_batch_f32   = never;
    int64_t min_batch_f16   = never; // and BF16
    int64_t min_batch_q4_0  = 64;    // never with the CPU's AVX-512 table
    int64_t min_batch_quant = never; // Q8_0 and every other quantized type
    // Smallest M and K of mul_mat.
    int64_t min_size = 256;
    // out_prod: smallest N, smallest M and K.
    int64_t min_batch_out_prod = 8;
    int64_t min_size_out_prod  = 64;

    // The measured defaults, or, when LOOM_BLAS_MIN_BATCH is a positive
    // integer, that batch threshold for every product and no size threshold.
    static Policy from_environment();

    // Whether op (a product that can_compute accepts) is worth running on BLAS.
    bool takes(const ggml_tensor * op) const;
};

} // namespace loom::blas
