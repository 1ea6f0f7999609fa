#version 450
// Gated linear units: dst = act(x) * g, one invocation per element of dst.
// With two inputs (ip[2] = 1) x is src0 and g src1 at dst's coordinates;
// with one, both come from src0's row, x at ip[0] and g at ip[1] elements
// along it. op is ggml_glu_op: 0 reglu, 1 geglu (tanh form), 2 swiglu,
// 3 swiglu_oai (alpha fp[0], limit fp[1]), 4 geglu_erf, 5 geglu_quick.
#include "common.glsl"

layout(local_size_x = 256) in;

// erf(x) (GLSL has none): Abramowitz and Stegun 7.1.26, absolute error
// below 1.5e-7.
float erf_approx(float x) {
    const float a = abs(x);
    const float t = 1.0 / (1.0 + 0.3275911 * a);
    const float p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - p * exp(-a * a));
}

void main() {
    const uint i = group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= P.n) {
        return;
    }
    const uvec4 c = coords(3u, i);
    const float x = load_s0(at(0u, c.x + P.ip[0], c.y, c.z, c.w));
    const float g = P.ip[2] != 0u ? load_s1(at(1u, c.x, c.y, c.z, c.w)) : load_s0(at(0u, c.x + P.ip[1], c.y, c.z, c.w));
    float       y;
    switch (P.op) {
        case 0u: y = max(x, 0.0) * g; break;
        case 2u: y = x / (1.0 + exp(-x)) * g; break;
        case 3u: {
            const float xc = min(x, P.fp[1]);
            const float gc = clamp(g, -P.fp[1], P.fp[1]);
            y              = xc / (1.0 + exp(-P.fp[0] * xc)) * (gc + 1.0);
            break;
        }
        case 4u: y = 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)) * g; break;
        case 5u: y = x / (1.0 + exp(-1.702 * x)) * g; break;
        default: { // 1
            const float u = 0.7978845608028654 * x * (1.0 + 0.044715 * x * x);
            y             = 0.5 * x * (1.0 + (1.0 - 2.0 / (exp(2.0 * u) + 1.0))) * g;
            break;
        }
    }
    store_d(at(3u, c.x, c.y, c.z, c.w), y);
}
