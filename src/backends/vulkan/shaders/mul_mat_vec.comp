#version 450
// Products with few columns (at most 4 per batch): one workgroup per row r
// of src0 and batch (i12, i13) computes dst[r, c, i12, i13] for every
// column c of src1, so each weight is read and unpacked once.
#include "common.glsl"
#include "matmul.glsl"

#define WG 64u
#define MAX_COLS 4u

layout(local_size_x = 64) in;

shared float red[MAX_COLS][WG];

void main() {
    const uint g = group_index();
    if (g >= P.n) {
        return;
    }
    const uint r    = g % P.ne[1];
    const uint i12  = g / P.ne[1] % P.ne[6];
    const uint i13  = g / (P.ne[1] * P.ne[6]);
    const uint K    = P.ne[0];
    const uint cols = P.ne[5];
    const uint ab   = a_row(r, i12, i13);
    const uint t    = gl_LocalInvocationID.x;
    uint       bb[MAX_COLS];
    [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
        bb[c] = at(1u, 0u, min(c, cols - 1u), i12, i13);
    }

    float sum[MAX_COLS] = {0.0, 0.0, 0.0, 0.0};
    if (P.ty[0] == TYPE_Q8_0 || P.ty[0] == TYPE_Q4_0) {
        // A block of 32 per invocation, its bytes read four at a time: the
        // scale once, then each word's four weights (Q8_0) or eight (Q4_0,
        // low nibbles k, high nibbles k + 16) against the columns; the
        // block's sum is scaled once.
        const bool q4 = P.ty[0] == TYPE_Q4_0;
        for (uint blk = t; blk < K / 32u; blk += WG) {
            const uint qb = ab + blk * P.nb[0];
            const float d = HALF_OF(s0_u32, qb);
            const uint k0 = blk * 32u;
            float part[MAX_COLS] = {0.0, 0.0, 0.0, 0.0};
            for (uint i = 0u; i < (q4 ? 4u : 8u); ++i) {
                const uint w = WORD_AT(s0_u32, qb + 2u + 4u * i);
                [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                    const uint k = k0 + 4u * i + e;
                    if (q4) {
                        const uint  q  = (w >> (8u * e)) & 0xFFu;
                        const float lo = float(q & 15u) - 8.0;
                        const float hi = float(q >> 4) - 8.0;
                        [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
                            if (c < cols) {
                                part[c] += lo * s1_f32[(bb[c] + k * P.nb[4]) >> 2] +
                                           hi * s1_f32[(bb[c] + (k + 16u) * P.nb[4]) >> 2];
                            }
                        }
                    } else {
                        const float q = float(bitfieldExtract(int(w), int(8u * e), 8));
                        [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
                            if (c < cols) {
                                part[c] += q * s1_f32[(bb[c] + k * P.nb[4]) >> 2];
                            }
                        }
                    }
                }
            }
            [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
                sum[c] += d * part[c];
            }
        }
    } else if (P.ty[0] != TYPE_F32 && P.ty[0] != TYPE_F16) {
        // The other block types 16 values at a time: their scales decoded
        // once per 16, the quants read a word at a time.
        const uint ty  = P.ty[0];
        const uint per = block_elems(ty) / 16u;
        for (uint ch = t; ch < K / 16u; ch += WG) {
            float v[16];
            dequant16(ty, ab + (ch / per) * P.nb[0], ch % per, v);
            const uint k0 = ch * 16u;
            [[unroll]] for (uint i = 0u; i < 16u; ++i) {
                [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
                    if (c < cols) {
                        sum[c] += v[i] * s1_f32[(bb[c] + (k0 + i) * P.nb[4]) >> 2];
                    }
                }
            }
        }
    } else {
        for (uint k = t; k < K; k += WG) {
            const float a = a_elem(ab, k);
            [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
                if (c < cols) {
                    sum[c] += a * s1_f32[(bb[c] + k * P.nb[4]) >> 2];
                }
            }
        }
    }
    [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
        red[c][t] = sum[c];
    }
    barrier();
    [[unroll]] for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            [[unroll]] for (uint c = 0u; c < MAX_COLS; ++c) {
                red[c][t] += red[c][t + s];
            }
        }
        barrier();
    }
    if (t < cols) {
        d_f32[at(3u, r, t, i12, i13) >> 2] = red[t][0];
    }
}
