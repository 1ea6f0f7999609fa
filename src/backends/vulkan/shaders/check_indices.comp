#version 450
// Note [Indices from data] in backend.cpp: checks every element of an index
// source (slot 1, I32 or I64) against [0, P.ip[0]) before the node that
// reads it runs. On a bad one: P.bad_index = the smallest linear position
// (i0 fastest) of a bad element, and the first invocation to find one sets
// P.bad and zeroes the P.ip[1] words of indirect dispatch arguments from
// byte P.off[3] of slot 3, so that the node and every dispatch after it in
// the submission run no workgroup. One invocation per element.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint g = group_index() * 256u + gl_LocalInvocationID.x;
    if (g >= P.n) {
        return;
    }
    const uvec4 c     = coords(1u, g);
    const uint  w     = at(1u, c.x, c.y, c.z, c.w) >> 2;
    const uint  low   = s1_u32[w];
    const uint  limit = P.ip[0];
    // An I32 index is bad when negative (a large unsigned word) or past the
    // limit; an I64 one also when its high word is not zero (limit < 2^32).
    const bool bad = P.ty[1] == TYPE_I64 ? (s1_u32[w + 1u] != 0u || low >= limit) : (int(low) < 0 || low >= limit);
    if (!bad) {
        return;
    }
    atomicMin(P.bad_index, g);
    if (atomicExchange(P.bad, 1u) == 0u) {
        const uint first = P.off[3] >> 2;
        for (uint i = 0u; i < P.ip[1]; ++i) {
            d_u32[first + i] = 0u;
        }
    }
}
