#pragma once

// The scale searches the quantizers of ggml 0.25.1 share (ggml-quants.c):
// for a group of n values, the scale (and min) whose rounded levels best
// fit them, and those levels. Each evaluates its floating-point expressions
// in the order ggml does, so that the bytes of a quantized row match ggml's.
// They run on the stack only; n <= 256.

#include <cstdint>
#include <cstring>

namespace loom::quant {

// Smallest largest magnitude a group must reach to be quantized at all.
constexpr float GROUP_MAX_EPS = 1e-15f;

// Rounds to the nearest integer, ties to even, for |f| <= 2^22: the
// mantissa of f + 1.5 * 2^23 holds the integer.
inline int nearest_int(float f) {
    const float v = f + 12582912.f;
    int         i;
    std::memcpy(&i, &v, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

// Symmetric levels L[i] in [0, 2 nmax) (value = (L - nmax) * scale), the
// scale fitted by weighted least squares (weights w, or x^2 when w is NULL)
// over 19 candidate inverse scales around -nmax / max. ggml's
// make_qx_quants with rmse_type 1.
float fit_symmetric(int n, int nmax, const float * x, int8_t * L, const float * w);

// Symmetric levels in [0, 2 nmax), weights x^2, refined by moving single
// levels while the fit improves (ggml's make_q3_quants with rmse).
float fit_symmetric_refined(int n, int nmax, const float * x, int8_t * L);

// Levels L[i] in [0, nmax] with value = scale * L - the_min: a weighted fit
// of scale and min over nstep + 1 candidate scales (rmin + rdelta * is + nmax
// levels across the range), by absolute (use_mad) or squared error. ggml's
// make_qkx2_quants, and make_qkx3_quants with weights. Laux: n bytes of room.
float fit_affine(int n, int nmax, const float * x, const float * w, uint8_t * L, float * the_min, uint8_t * Laux,
                 float rmin, float rdelta, int nstep, bool use_mad);

// Non-negative levels L[i] in [0, nmax] for non-negative x (the scales of
// a super-block), weighted, nine candidate scales then single-level moves
// (ggml's make_qp_quants).
float fit_positive(int n, int nmax, const float * x, uint8_t * L, const float * w);

} // namespace loom::quant
