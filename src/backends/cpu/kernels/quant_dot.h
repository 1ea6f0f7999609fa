#pragma once

// Portable dot products of the legacy, K-quant, i-quant and ternary weight
// types against their activation types (ggml's vec_dot_type): Q4_1 and Q5_1
// against Q8_1, Q5_0, IQ4_NL and MXFP4 against Q8_0, the K-quants, the
// i-quants and the ternary types against Q8_K. Integer sums within each group of a block, scaled and
// accumulated in f32 block by block. Pure functions; n a multiple of the
// block size. They back ggml_get_type_traits_cpu's vec_dot and are the
// reference twins of the kernel tables' gemv_quant entries.

#include <cstdint>

namespace loom::cpu {

float dot_q4_1_q8_1(int64_t n, const void * x, const void * y);
float dot_q5_0_q8_0(int64_t n, const void * x, const void * y);
float dot_q5_1_q8_1(int64_t n, const void * x, const void * y);
float dot_q2_K_q8_K(int64_t n, const void * x, const void * y);
float dot_q3_K_q8_K(int64_t n, const void * x, const void * y);
float dot_q4_K_q8_K(int64_t n, const void * x, const void * y);
float dot_q5_K_q8_K(int64_t n, const void * x, const void * y);
float dot_q6_K_q8_K(int64_t n, const void * x, const void * y);
// The lookup-table types: IQ4_NL and MXFP4 against Q8_0, IQ4_XS against
// Q8_K.
float dot_iq4_nl_q8_0(int64_t n, const void * x, const void * y);
float dot_mxfp4_q8_0(int64_t n, const void * x, const void * y);
float dot_iq4_xs_q8_K(int64_t n, const void * x, const void * y);
// The grid i-quants and the ternary types against Q8_K (iquant_dot.cpp).
float dot_iq2_xxs_q8_K(int64_t n, const void * x, const void * y);
float dot_iq2_xs_q8_K(int64_t n, const void * x, const void * y);
float dot_iq2_s_q8_K(int64_t n, const void * x, const void * y);
float dot_iq3_xxs_q8_K(int64_t n, const void * x, const void * y);
float dot_iq3_s_q8_K(int64_t n, const void * x, const void * y);
float dot_iq1_s_q8_K(int64_t n, const void * x, const void * y);
float dot_iq1_m_q8_K(int64_t n, const void * x, const void * y);
float dot_tq1_0_q8_K(int64_t n, const void * x, const void * y);
float dot_tq2_0_q8_K(int64_t n, const void * x, const void * y);
// The types without a dot product of their own, against Q8_0 as in ggml:
// both rows decoded, a chunk of whole blocks at a time, summed in double.
float dot_nvfp4_q8_0(int64_t n, const void * x, const void * y);
float dot_q1_0_q8_0(int64_t n, const void * x, const void * y);
float dot_q2_0_q8_0(int64_t n, const void * x, const void * y);

} // namespace loom::cpu
