#version 450
// One workgroup per row: dst = softmax(src0 * scale + slope * mask).
// fp[0] scale, fp[1] max_bias, fp[2] m0, fp[3] m1, ip[0] n_head_log2,
// ip[1] 1 when there is a mask (src1, F32 or F16; its rows are the row's
// dim-1 index, its dims 2 and 3 repeat over src0's).
#include "common.glsl"

layout(local_size_x = 256) in;

shared float red[256];

float reduce(float v, bool is_max) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    [[unroll]] for (uint s = 128u; s > 0u; s >>= 1u) {
        if (t < s) {
            red[t] = is_max ? max(red[t], red[t + s]) : red[t] + red[t + s];
        }
        barrier();
    }
    const float r = red[0];
    barrier();
    return r;
}

void main() {
    const uint row = group_index();
    if (row >= P.n) {
        return;
    }
    const uint n0 = P.ne[0];
    const uint i1 = row % P.ne[1], i2 = row / P.ne[1] % P.ne[2], i3 = row / (P.ne[1] * P.ne[2]);
    const uint t  = gl_LocalInvocationID.x;

    float slope = 1.0;
    if (P.fp[1] > 0.0) {
        const uint nl2 = uint(P.ip[0]);
        slope = i2 < nl2 ? pow(P.fp[2], float(i2 + 1u)) : pow(P.fp[3], float(2u * (i2 - nl2) + 1u));
    }
    const bool has_mask = P.ip[1] != 0u;
    const uint mrow     = has_mask ? at(1u, 0u, i1, i2 % P.ne[6], i3 % P.ne[7]) : 0u;

    float m = -1.0 / 0.0;
    for (uint i0 = t; i0 < n0; i0 += 256u) {
        float x = load_s0(at(0u, i0, i1, i2, i3)) * P.fp[0];
        if (has_mask) {
            x += slope * load_s1(mrow + i0 * P.nb[4]);
        }
        store_d(at(3u, i0, i1, i2, i3), x);
        m = max(m, x);
    }
    m = reduce(m, true);
    float s = 0.0;
    for (uint i0 = t; i0 < n0; i0 += 256u) {
        const uint  b = at(3u, i0, i1, i2, i3);
        const float e = exp(load_d(b) - m);
        store_d(b, e);
        s += e;
    }
    s = reduce(s, false);
    const float inv = 1.0 / s;
    for (uint i0 = t; i0 < n0; i0 += 256u) {
        const uint b = at(3u, i0, i1, i2, i3);
        store_d(b, load_d(b) * inv);
    }
}
