#version 450
// dst = src0 (op) src1, src1 repeated over src0's shape (ggml broadcasting):
// op 0 add, 1 sub, 2 mul, 3 div. One invocation per element of dst.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint i = group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= P.n) {
        return;
    }
    const uvec4 c = coords(3u, i);
    const float a = load_s0(at(0u, c.x, c.y, c.z, c.w));
    const float b = load_s1(at(1u, c.x % P.ne[4], c.y % P.ne[5], c.z % P.ne[6], c.w % P.ne[7]));
    float       r;
    switch (P.op) {
        case 0u: r = a + b; break;
        case 1u: r = a - b; break;
        case 2u: r = a * b; break;
        default: r = a / b; break;
    }
    store_d(at(3u, c.x, c.y, c.z, c.w), r);
}
