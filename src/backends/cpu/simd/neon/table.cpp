// The 64-bit Arm kernel tables: "neon" (the base architecture's Advanced
// SIMD), "neon_dotprod" (the neon table with the quantized products on
// the dot-product extension's SDOT) and "neon_i8mm" (the neon_dotprod table
// with Q8_0 and Q4_0 products of several columns on SMMLA). Each is the portable table with the
// entries these files have replaced; an entry not replaced stays the
// portable one. A table is built on the first call of its accessor after
// its check passed.

#include "backends/cpu/simd/kernel_table.h"

#if defined(__aarch64__)

#include "neon.h"

namespace loom::cpu {

namespace {

KernelTable build_neon() {
    KernelTable t       = portable_kernels();
    t.name              = "neon";
    t.dot_f32           = neon::dot_f32;
    t.dot_f16           = neon::dot_f16;
    t.dot_bf16          = neon::dot_bf16;
    t.quantize_row_q8_0 = neon::quantize_row_q8_0;
    t.quantize_row_q8_K = neon::quantize_row_q8_K;
    t.quantize_row_q8_1 = neon::quantize_row_q8_1;
    t.fp16_to_fp32_row  = neon::fp16_to_fp32_row;
    t.fp32_to_fp16_row  = neon::fp32_to_fp16_row;
    t.bf16_to_fp32_row  = neon::bf16_to_fp32_row;
    t.gemv_f32          = neon::gemv_f32;
    t.gemv_f16          = neon::gemv_f16;
    t.gemv_bf16         = neon::gemv_bf16;
    t.max_f32           = neon::max_f32;
    t.exp_sub_sum_f32   = neon::exp_sub_sum_f32;
    t.silu_f32          = neon::silu_f32;
    t.mad_rows_f32      = neon::mad_rows_f32;
    t.mad_rows_f16      = neon::mad_rows_f16;
    t.binary_f32[0]     = neon::binary_f32<0>;
    t.binary_f32[1]     = neon::binary_f32<1>;
    t.binary_f32[2]     = neon::binary_f32<2>;
    t.binary_f32[3]     = neon::binary_f32<3>;
    t.scale_f32         = neon::scale_f32;
    t.sum_lanes_f64     = neon::sum_lanes_f64;
    t.sum_sq_lanes_f64  = neon::sum_sq_lanes_f64;
    t.rope_f32          = neon::rope_f32;
    t.adamw_f32         = neon::adamw_f32;
    t.decay_dot_f32     = neon::decay_dot_f32;
    t.wkv7_rows_f32     = neon::wkv7_rows_f32;
    t.delta_row_f32     = neon::delta_row_f32;
    t.gemm_micro        = neon::gemm_micro;
    t.mr                = neon::GEMM_MR;
    t.nr                = neon::GEMM_NR;
    neon::add_quant_kernels(t);
    return t;
}

KernelTable build_neon_dotprod() {
    KernelTable t   = *neon_kernels();
    t.name          = "neon_dotprod";
    neon_dot::add_quant_kernels(t);
    // Notes [Interleaved Q4_0 rows] and [Interleaved Q4_K rows]: the
    // CPU_REPACK layouts of this table.
    t.gemv_repacked[GGML_TYPE_Q4_0] = neon_dot::gemv_q4_0_x4;
    t.gemv_repacked[GGML_TYPE_Q4_K] = neon_dot::gemv_q4_K_x4;
    t.q4_K_rows_interleaved         = true;
    return t;
}

KernelTable build_neon_i8mm() {
    KernelTable t = *neon_dotprod_kernels();
    t.name        = "neon_i8mm";
    t.gemv_q8_0   = neon_i8mm::gemv_q8_0;
    t.gemv_q4_0   = neon_i8mm::gemv_q4_0;
    return t;
}

} // namespace

const KernelTable * neon_kernels() {
    if (!neon_table_runs()) return nullptr;
    static const KernelTable table = build_neon();
    return &table;
}

const KernelTable * neon_dotprod_kernels() {
    if (!neon_dotprod_table_runs()) return nullptr;
    static const KernelTable table = build_neon_dotprod();
    return &table;
}

const KernelTable * neon_i8mm_kernels() {
    if (!neon_i8mm_table_runs()) return nullptr;
    static const KernelTable table = build_neon_i8mm();
    return &table;
}

} // namespace loom::cpu

#else

namespace loom::cpu {

const KernelTable * neon_kernels() {
    return nullptr;
}
const KernelTable * neon_dotprod_kernels() {
    return nullptr;
}
const KernelTable * neon_i8mm_kernels() {
    return nullptr;
}

} // namespace loom::cpu

#endif
