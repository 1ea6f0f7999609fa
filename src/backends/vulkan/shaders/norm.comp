#version 450
// One workgroup per row of src0: op 0 norm ((x - mean) / sqrt(var + eps)),
// op 1 rms_norm (x / sqrt(mean(x^2) + eps)); eps = fp[0].
#include "common.glsl"

layout(local_size_x = 256) in;

shared float red[256];

float reduce_sum(float v) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    [[unroll]] for (uint s = 128u; s > 0u; s >>= 1u) {
        if (t < s) {
            red[t] += red[t + s];
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
    const uint  n0 = P.ne[0];
    const uint  i1 = row % P.ne[1], i2 = row / P.ne[1] % P.ne[2], i3 = row / (P.ne[1] * P.ne[2]);
    const uint  t  = gl_LocalInvocationID.x;
    float       mean = 0.0;
    if (P.op == 0u) {
        float s = 0.0;
        for (uint i0 = t; i0 < n0; i0 += 256u) {
            s += load_s0(at(0u, i0, i1, i2, i3));
        }
        mean = reduce_sum(s) / float(n0);
    }
    float s2 = 0.0;
    for (uint i0 = t; i0 < n0; i0 += 256u) {
        const float x = load_s0(at(0u, i0, i1, i2, i3)) - mean;
        s2 += x * x;
    }
    const float scale = inversesqrt(reduce_sum(s2) / float(n0) + P.fp[0]);
    for (uint i0 = t; i0 < n0; i0 += 256u) {
        const float x = load_s0(at(0u, i0, i1, i2, i3)) - mean;
        store_d(at(3u, i0, i1, i2, i3), x * scale);
    }
}
