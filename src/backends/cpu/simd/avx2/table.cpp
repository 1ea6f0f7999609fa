// The AVX2 kernel table. Building it calls functions compiled for AVX2 (the
// i-quant entries are added by avx2::add_iquant_kernels), so it is built on
// the first call of avx2_kernels() after avx2_table_runs() said yes, never at
// load time: on a processor without AVX2 it is never built.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "backends/cpu/features.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"

#include "target_begin.h"
#include "avx2.h"
#include "target_end.h"

namespace loom::cpu {

namespace {

const KernelTable k_avx2_base = {
    "avx2",
    avx2::dot_f32,
    avx2::dot_f16,
    avx2::dot_bf16,
    avx2::dot_q8_0_q8_0,
    avx2::dot_q4_0_q8_0,
    avx2::quantize_row_q8_0,
    avx2::fp16_to_fp32_row,
    avx2::fp32_to_fp16_row,
    avx2::bf16_to_fp32_row,
    avx2::gemv_f32,
    avx2::gemv_f16,
    avx2::gemv_bf16,
    avx2::gemv2_q8_0,
    avx2::gemv2_q4_0,
    avx2::max_f32,
    avx2::exp_sub_sum_f32,
    avx2::silu_f32,
    {avx2::binary_f32<0>, avx2::binary_f32<1>, avx2::binary_f32<2>, avx2::binary_f32<3>},
    avx2::gemm_pack,
    avx2::gemm_micro,
    avx2::GEMM_MR,
    avx2::GEMM_NR,
    // an a panel of 256 x 16 floats (16 KiB) stays in L1, a chunk of 64
    // rows (64 KiB) in L2, and the b block of 256 x 4092 (4 MiB) in L3.
    64,
    256,
    4092,
    nullptr,
    false,
};

KernelTable build_avx2() {
    KernelTable t  = k_avx2_base;
    t.mad_rows_f32 = avx2::mad_rows_f32;
    t.mad_rows_f16 = avx2::mad_rows_f16;
    t.scale_f32    = avx2::scale_f32;
    t.sum_lanes_f64    = avx2::sum_lanes_f64;
    t.sum_sq_lanes_f64 = avx2::sum_sq_lanes_f64;
    // Where each core has 2 MiB of L2 and 48 KiB of L1 (Intel's server and
    // client cores since Golden Cove), deeper blocks pay: an a panel of
    // 512 x 16 floats (32 KiB) in L1, a chunk of 128 rows (256 KiB) and the
    // b block of 512 x 1020 (2 MiB) in L2, C read and written once per 512
    // values of k. loom-bench, Intel Xeon (family 6 model 207), one thread:
    // 79.6 / 78.8 GFLOP/s (84 / 83% of the AVX2 FMA peak) against 73.6 /
    // 78.5 with the blocks above (2048^3, 4096 x 512 x 4096).
    if (features().l2_bytes >= (2L << 20) && features().l1d_bytes >= (48L << 10)) {
        t.mc = 128;
        t.kc = 512;
        t.nc = 1020;
    }
    t.adamw_f32    = avx2::adamw_f32;
    t.rope_f32     = avx2::rope_f32;
    t.decay_dot_f32 = avx2::decay_dot_f32;
    t.delta_row_f32 = avx2::delta_row_f32;
    t.wkv7_rows_f32 = avx2::wkv7_rows_f32;
    // Two rows per register (rows2.cpp), the columns prepared once per
    // product from four columns on.
    t.qgemm_q4_0 = {avx2::qcols2_bytes, avx2::qcols2_prepare_q4_0, avx2::qgemm2_q4_0, 4};
    t.qgemm_q8_0 = {avx2::qcols2_bytes, avx2::qcols2_prepare_q8_0, avx2::qgemm2_q8_0, 4};
    // Q4_0 and Q8_0 in the CPU_REPACK buffer: Notes [Q4_0 rows by eight] and
    // [Q8_0 rows by eight] (repack.h).
    t.qgemm_q4_0_x8 = {avx2::qcols_bytes_by8, avx2::qcols_prepare_q4_0_by8, avx2::qgemm_q4_0_by8, 1};
    t.qgemm_q8_0_x8 = {avx2::qcols_bytes_by8, avx2::qcols_prepare_q8_0_by8, avx2::qgemm_q8_0_by8, 1};
    t.gemv_quant[GGML_TYPE_Q2_K] = avx2::gemv_q2_K;
    t.gemv_quant[GGML_TYPE_Q3_K] = avx2::gemv_q3_K;
    t.gemv_quant[GGML_TYPE_Q4_K] = avx2::gemv_q4_K;
    t.decode_rows[GGML_TYPE_Q4_K]  = avx2::decode_rows_q4_K; // Note [Q4_K panels of eight rows]
    t.gemv_decoded[GGML_TYPE_Q4_K] = avx2::gemv_decoded_q4_K;
    t.gemv_repacked[GGML_TYPE_Q4_K]        = avx2::gemv_q4_K_repacked; // Note [Repacked Q4_K]
    t.decode_rows_repacked[GGML_TYPE_Q4_K] = avx2::decode_rows_q4_K_repacked;
    t.gemv_quant[GGML_TYPE_Q5_K] = avx2::gemv_q5_K;
    t.gemv_quant[GGML_TYPE_Q6_K] = avx2::gemv_q6_K;
    t.decode_rows[GGML_TYPE_Q6_K]  = avx2::decode_rows_q6_K; // Note [Q6_K panels of eight rows]
    t.gemv_decoded[GGML_TYPE_Q6_K] = avx2::gemv_decoded_q6_K;
    t.quantize_row_q8_K          = avx2::quantize_row_q8_K;
    // Two rows per register (rows2_legacy.cpp, Note [Legacy rows per
    // register]).
    t.gemv_quant[GGML_TYPE_Q4_1]    = avx2::gemv2_q4_1;
    t.gemv_quant[GGML_TYPE_Q5_0]    = avx2::gemv2_q5_0;
    t.qgemm_quant[GGML_TYPE_Q5_0]   = {avx2::qcols2_bytes, avx2::qcols2_prepare_q5_0, avx2::qgemm2_q5_0, 4};
    t.gemv_quant[GGML_TYPE_Q5_1]    = avx2::gemv2_q5_1;
    t.gemv_quant[GGML_TYPE_IQ4_NL]  = avx2::gemv2_iq4_nl;
    t.qgemm_quant[GGML_TYPE_IQ4_NL] = {avx2::qcols2_bytes, avx2::qcols2_prepare_iq4_nl, avx2::qgemm2_iq4_nl, 4};
    t.gemv_quant[GGML_TYPE_MXFP4]   = avx2::gemv2_mxfp4;
    t.qgemm_quant[GGML_TYPE_MXFP4]  = {avx2::qcols2_bytes, avx2::qcols2_prepare_mxfp4, avx2::qgemm2_mxfp4, 4};
    t.gemv_quant[GGML_TYPE_IQ4_XS]   = avx2::gemv_iq4_xs;
    t.decode_rows[GGML_TYPE_IQ4_XS]  = avx2::decode_rows_iq4_xs; // Note [IQ4_XS stored rows]
    t.gemv_decoded[GGML_TYPE_IQ4_XS] = avx2::gemv_decoded_iq4_xs;
    // Note [Interleaved IQ4_XS rows] (repack.h)
    t.gemv_repacked[GGML_TYPE_IQ4_XS]        = avx2::gemv_iq4_xs_interleaved;
    t.decode_rows_repacked[GGML_TYPE_IQ4_XS] = avx2::decode_rows_iq4_xs_interleaved;
    avx2::add_iquant_kernels(t);
    // TQ2_0's levels are two shifts and a mask away: its product with eight
    // columns at a time (one maddubs and one 16-bit add per register and
    // column) beats stored rows, which take a madd with the group scales
    // per register and column.
    t.decode_rows[GGML_TYPE_TQ2_0]  = nullptr;
    t.gemv_decoded[GGML_TYPE_TQ2_0] = nullptr;
    return t;
}

} // namespace

const KernelTable * avx2_kernels() {
    if (!avx2_table_runs()) return nullptr;
    static const KernelTable table = build_avx2();
    return &table;
}

} // namespace loom::cpu

#endif // x86
