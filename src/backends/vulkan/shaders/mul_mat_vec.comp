#version 450
// dst[r, c, i12, i13] = dot(row r of src0, column c of src1), one
// workgroup per element of dst: for products with few columns.
#include "common.glsl"
#include "matmul.glsl"

layout(local_size_x = 256) in;

shared float red[256];

void main() {
    const uint g = group_index();
    if (g >= P.n) {
        return;
    }
    const uint r   = g % P.ne[1];
    const uint c   = g / P.ne[1] % P.ne[5];
    const uint i12 = g / (P.ne[1] * P.ne[5]) % P.ne[6];
    const uint i13 = g / (P.ne[1] * P.ne[5] * P.ne[6]);
    const uint K   = P.ne[0];
    const uint ab  = a_row(r, i12, i13);
    const uint bb  = at(1u, 0u, c, i12, i13);
    const uint t   = gl_LocalInvocationID.x;

    float sum = 0.0;
    if (P.ty[0] == TYPE_Q8_0 || P.ty[0] == TYPE_Q4_0) {
        // A block of 32 per invocation.
        for (uint blk = t; blk < K / 32u; blk += 256u) {
            const uint qb = ab + blk * P.nb[0];
            [[unroll]] for (uint j = 0u; j < 32u; ++j) {
                sum += QUANT_ELEM(s0_u32, P.ty[0], qb, j) * s1_f32[(bb + (blk * 32u + j) * P.nb[4]) >> 2];
            }
        }
    } else {
        for (uint k = t; k < K; k += 256u) {
            sum += a_elem(ab, k) * s1_f32[(bb + k * P.nb[4]) >> 2];
        }
    }
    red[t] = sum;
    barrier();
    [[unroll]] for (uint s = 128u; s > 0u; s >>= 1u) {
        if (t < s) {
            red[t] += red[t + s];
        }
        barrier();
    }
    if (t == 0u) {
        d_f32[at(3u, r, c, i12, i13) >> 2] = red[0];
    }
}
