#pragma once

// Blocked, packed matrix product on a kernel table's micro-kernel: the
// many-column path of mul_mat for f32, f16 and bf16 weights (f32 arithmetic,
// or bf16 pairs where the table has a BF16 GEMM).

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/simd/kernel_table.h"
#include "ggml.h"

namespace loom::cpu {

// One matrix product C = A * B^T of the mul_mat layout:
//   A: M rows of K weights (F32, F16 or BF16, contiguous), lda bytes apart;
//   B: N columns of K f32 values, ldb bytes apart, values b_step bytes apart;
//   C: f32, C[m + n * ldc].
struct GemmProblem {
    ggml_type    a_type;
    const char * a;
    size_t       lda;
    const char * b;
    size_t       ldb, b_step;
    float *      c;
    size_t       ldc;
    int64_t      K;
    // F16 weights in the repacked layout (Note [Repacked weights]); a's
    // rows are then read in chunks of 32 values.
    bool a_repacked = false;
};

// True when gemm() multiplies bf16 weights on the table's BF16 GEMM
// (Note [BF16 GEMM panels] in gemm.cpp), with the activations rounded to
// bf16; otherwise every weight type is converted to f32.
bool gemm_uses_bf16(const KernelTable & kt, ggml_type a_type);

// Scratch of a product: the packed b block (kc x nc), which the threads of a
// team share, and per thread the packed a chunk and room for converted rows.
// Sizes are for products of at most N columns with weights of a_type, in
// 64-byte aligned pieces.
size_t gemm_b_block_bytes(const KernelTable & kt, ggml_type a_type, int64_t N);
size_t gemm_private_bytes(const KernelTable & kt, ggml_type a_type);
// The team's shared counters, before the b block.
constexpr size_t GEMM_TEAM_HEADER = 128;

// The threads that compute one product together: they pack each b block
// together, then take chunks of mc rows from a shared counter. Every thread
// of the computation must call gemm with the same problem and team.
struct GemmTeam {
    const ComputeParams * p;        // ith, nth and sync
    void *                counters; // GEMM_TEAM_HEADER bytes of shared scratch
};

// Computes rows [m0, m1) x columns [n0, n1) of C. Every element is one fp32
// running sum over k (over pairs of k on the BF16 GEMM) in increasing order,
// so the result does not depend on the rectangle, the team, the table's
// block sizes or the thread that computes it, only on the table's
// micro-kernel.
// b_block: gemm_b_block_bytes, shared by the team (or the caller's own when
// team is nullptr); priv: gemm_private_bytes, the caller's own; both 64-byte
// aligned.
void gemm(const KernelTable & kt, const GemmProblem & pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
          void * b_block, void * priv, const GemmTeam * team);

// True when gemm takes weights of this type.
inline bool gemm_weight_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

} // namespace loom::cpu
