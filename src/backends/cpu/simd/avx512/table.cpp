// The AVX-512 kernel table: the AVX2 table with the F32, F16 and quantized
// matrix-vector products and the f32 GEMM replaced by AVX-512 (VNNI)
// versions, the products on prepared columns added, and 512-bit weighted row
// sums and element-wise ops. Building it calls functions compiled for
// AVX-512 (add_iquant_kernels and the panel families), so it is built on the
// first call of avx512_kernels() after avx512_table_runs() said yes: the
// processor and the OS support AVX-512 F, BW, VL and VNNI, and AVX2, FMA and
// F16C for the inherited entries.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "backends/cpu/features.h"
#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512.h"
#include "target_end.h"

namespace loom::cpu {

const KernelTable * avx512_kernels() {
    if (!avx512_table_runs()) return nullptr;
    static const KernelTable table = [] {
        KernelTable t = *avx2_kernels();
        t.name        = "avx512";
        t.gemv_f32    = avx512::gemv_f32;
        t.gemv_f16    = avx512::gemv_f16;
        t.gemv_q8_0   = avx512::gemv_q8_0; // the AVX2 table's bits, as Q4_0's
        t.gemv_q4_0   = avx512::gemv_q4_0; // the AVX2 table's bits (Note [Q4_0 rows in pairs of lanes])
        t.int8_dot_products = true;
        t.mad_rows_f32      = avx512::mad_rows_f32;
        t.mad_rows_f16      = avx512::mad_rows_f16;
        t.max_f32           = avx512::max_f32;
        t.exp_sub_sum_f32   = avx512::exp_sub_sum_f32;
        t.silu_f32          = avx512::silu_f32;
        t.scale_f32         = avx512::scale_f32;
        t.adamw_f32         = avx512::adamw_f32;
        t.rope_f32          = avx512::rope_f32;
        t.decay_dot_f32     = avx512::decay_dot_f32;
        t.delta_row_f32     = avx512::delta_row_f32;
        t.wkv7_rows_f32     = avx512::wkv7_rows_f32;
        t.binary_f32[0]     = avx512::binary_f32<0>;
        t.binary_f32[1]     = avx512::binary_f32<1>;
        t.binary_f32[2]     = avx512::binary_f32<2>;
        t.binary_f32[3]     = avx512::binary_f32<3>;
        // The f32 GEMM on 512-bit FMAs. Deep blocks pay here: an a panel of
        // 1024 x 32 floats (128 KiB) is read from L2, a b panel of
        // 1024 x 14 (56 KiB) from L1 and L2, and C is read and written once
        // per 1024 values of k. loom-bench, 2 threads, against kc = 256 and
        // nc = 4092: 81-84% of the AVX-512 FMA peak instead of 71-75%.
        t.gemm_pack  = avx512::gemm_pack;
        t.gemm_micro = avx512::gemm_micro;
        t.mr         = avx512::GEMM_MR;
        t.nr         = avx512::GEMM_NR;
        t.mc         = 64;
        t.kc         = 1024;
        t.nc         = 1022;
        // Four rows per register: prepared columns pay from four columns on
        // (bench_ops, one thread, 4096 x 14336: 4 / 5 / 8 columns 10 / 17 /
        // 22% faster; 2 and 3 columns 15-25% slower, so gemv keeps them).
        t.qgemm_q8_0 = {avx512::qcols_bytes, avx512::qcols_prepare_q8_0, avx512::qgemm_q8_0, 4};
        // Q4_0 as Q8_0, with the AVX2 table's bits (Note [Q4_0 rows in pairs
        // of lanes]), which rows interleaved by eight give too.
        t.qgemm_q4_0 = {avx512::qcols_bytes, avx512::qcols_prepare_q4_0, avx512::qgemm_q4_0, 1};
        // Note [Q8_0 rows by eight] (repack.h)
        t.qgemm_q8_0_x8 = {avx512::qcols_bytes_by8, avx512::qcols_prepare_q8_0_by8, avx512::qgemm_q8_0_by8, 1};
        t.gemv_f16_x8   = avx512::gemv_f16_x8;
        t.gemv_quant[GGML_TYPE_Q2_K] = avx512::gemv_q2_K;
        // Q6_K's rows decoded once: this table's VNNI panels (Note [Q6_K
        // panels], add_kquant_panel_kernels below), not the AVX2 table's
        // stored rows, whose bits are that table's.
        t.gemv_quant[GGML_TYPE_Q3_K] = avx512::gemv_q3_K;
        t.gemv_quant[GGML_TYPE_Q4_K] = avx512::gemv_q4_K;
        // The AVX2 table's repacked Q4_K decodes into its own stored rows,
        // not this table's panels: Q4_K stays in ggml's layout here.
        t.gemv_repacked[GGML_TYPE_Q4_K]        = nullptr;
        t.decode_rows_repacked[GGML_TYPE_Q4_K] = nullptr;
        t.gemv_quant[GGML_TYPE_Q5_K] = avx512::gemv_q5_K;
        t.gemv_quant[GGML_TYPE_Q6_K] = avx512::gemv_q6_K;
        t.quantize_row_q8_K          = avx512::quantize_row_q8_K;
        t.gemv_quant[GGML_TYPE_Q4_1] = avx512::gemv4_q4_1;
        // Q5_0 and IQ4_NL as Q8_0: four rows per register, prepared columns
        // from four columns on.
        t.gemv_quant[GGML_TYPE_Q5_0]  = avx512::gemv4_q5_0;
        t.qgemm_quant[GGML_TYPE_Q5_0] = {avx512::qcols_bytes, avx512::qcols_prepare_q5_0, avx512::qgemm_q5_0, 4};
        t.gemv_quant[GGML_TYPE_Q5_1] = avx512::gemv4_q5_1;
        t.gemv_quant[GGML_TYPE_IQ4_NL]  = avx512::gemv4_iq4_nl;
        t.qgemm_quant[GGML_TYPE_IQ4_NL] = {avx512::qcols_bytes, avx512::qcols_prepare_iq4_nl, avx512::qgemm_iq4_nl, 4};
        t.gemv_quant[GGML_TYPE_MXFP4]  = avx512::gemv4_mxfp4;
        t.qgemm_quant[GGML_TYPE_MXFP4] = {avx512::qcols_bytes, avx512::qcols_prepare_iq4_nl, avx512::qgemm_mxfp4, 4};
        t.gemv_quant[GGML_TYPE_IQ4_XS] = avx512::gemv_iq4_xs;
        avx512::add_iquant_kernels(t);
        avx512::add_iquant_panel_kernels(t);
        avx512::add_kquant_panel_kernels(t);
        // IQ4_XS rows interleaved by eight (Note [Interleaved IQ4_XS rows]):
        // this table's own kernels, with its gemv_iq4_xs's bits and its
        // panels (the AVX2 table's entries give that table's).
        t.gemv_repacked[GGML_TYPE_IQ4_XS]        = avx512::gemv_iq4_xs_interleaved;
        t.decode_rows_repacked[GGML_TYPE_IQ4_XS] = avx512::decode_rows_iq4_xs_interleaved;
        t.qgemm_q4_0_x8 = {avx512::qcols_bytes_by8, avx512::qcols_prepare_q4_0_by8, avx512::qgemm_q4_0_by8, 1};
        return t;
    }();
    return &table;
}

} // namespace loom::cpu

#endif // x86
