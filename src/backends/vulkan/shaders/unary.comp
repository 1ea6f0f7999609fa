#version 450
// dst = f(src0) element by element, the elements of both taken in ggml's
// logical order (so dst and src0 may differ in shape, as in cpy):
// op 0 copy, 1 scale (x * fp[0] + fp[1]), 2 silu, 3 gelu (tanh form),
// 4 neg, 5 relu, 6 tanh, 7 sigmoid, 8 gelu_quick, 9 sqr, 10 sqrt, 11 exp.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint i = group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= P.n) {
        return;
    }
    const uvec4 s = coords(0u, i);
    const uvec4 d = coords(3u, i);
    const float x = load_s0(at(0u, s.x, s.y, s.z, s.w));
    float       y;
    switch (P.op) {
        case 0u: y = x; break;
        case 1u: y = x * P.fp[0] + P.fp[1]; break;
        case 2u: y = x / (1.0 + exp(-x)); break;
        case 4u: y = -x; break;
        case 5u: y = max(x, 0.0); break;
        case 6u: y = 1.0 - 2.0 / (exp(2.0 * x) + 1.0); break;
        case 7u: y = 1.0 / (1.0 + exp(-x)); break;
        case 8u: y = x / (1.0 + exp(-1.702 * x)); break;
        case 9u: y = x * x; break;
        case 10u: y = sqrt(x); break;
        case 11u: y = exp(x); break;
        default: { // 3
            // sqrt(2/pi) and the cubic coefficient of GELU's tanh form.
            const float u = 0.7978845608028654 * x * (1.0 + 0.044715 * x * x);
            // tanh(u) = 1 - 2 / (exp(2u) + 1), which stays finite for large |u|.
            y = 0.5 * x * (1.0 + (1.0 - 2.0 / (exp(2.0 * u) + 1.0)));
            break;
        }
    }
    store_d(at(3u, d.x, d.y, d.z, d.w), y);
}
