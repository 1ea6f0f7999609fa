#version 450
// Note [Indices from data] in backend.cpp: checks every element of one or
// more index sources before the nodes that read them run. Slot 0 holds the
// sources (I32 or I64), slot 1 from byte P.off[1] a table of P.ip[0]
// entries (struct IndexEntry in shaders.h), slot 3 the group counts of the
// graph's indirect dispatches. On a bad index of an entry: its bad_index =
// the smallest linear position (i0 fastest) of a bad element, and the first
// invocation to find one sets its bad and zeroes its zero_n words of group
// counts from word zero_at, so that its node and every dispatch after it in
// the submission run no workgroup. One invocation per element of all entries.
#include "common.glsl"

layout(local_size_x = 256) in;

const uint ENTRY_WORDS = 18u; // sizeof(IndexEntry) / 4
// Word offsets of the fields of an entry.
const uint E_NE = 0u, E_NB = 4u, E_OFF = 8u, E_TYPE = 9u, E_LIMIT = 10u, E_FIRST = 11u, E_COUNT = 12u,
           E_ZERO_AT = 13u, E_ZERO_N = 14u, E_BAD = 15u, E_BAD_INDEX = 16u;

void main() {
    const uint g = group_index() * 256u + gl_LocalInvocationID.x;
    if (g >= P.n) {
        return;
    }
    // The entry whose elements hold g (few entries: a linear search).
    uint e = P.off[1] >> 2;
    for (uint k = 0u; k < P.ip[0]; ++k, e += ENTRY_WORDS) {
        if (g - s1_u32[e + E_FIRST] < s1_u32[e + E_COUNT]) {
            break;
        }
    }
    uint i = g - s1_u32[e + E_FIRST];
    const uint i0 = i % s1_u32[e + E_NE];
    i /= s1_u32[e + E_NE];
    const uint i1 = i % s1_u32[e + E_NE + 1u];
    i /= s1_u32[e + E_NE + 1u];
    const uint i2 = i % s1_u32[e + E_NE + 2u];
    const uint i3 = i / s1_u32[e + E_NE + 2u];
    const uint w  = (s1_u32[e + E_OFF] + i0 * s1_u32[e + E_NB] + i1 * s1_u32[e + E_NB + 1u] +
                    i2 * s1_u32[e + E_NB + 2u] + i3 * s1_u32[e + E_NB + 3u]) >> 2;
    const uint low   = s0_u32[w];
    const uint limit = s1_u32[e + E_LIMIT];
    // An I32 index is bad when negative (a large unsigned word) or past the
    // limit; an I64 one also when its high word is not zero (limit < 2^32).
    const bool bad = s1_u32[e + E_TYPE] == TYPE_I64 ? (s0_u32[w + 1u] != 0u || low >= limit)
                                                    : (int(low) < 0 || low >= limit);
    if (!bad) {
        return;
    }
    atomicMin(s1_u32[e + E_BAD_INDEX], g - s1_u32[e + E_FIRST]);
    if (atomicExchange(s1_u32[e + E_BAD], 1u) == 0u) {
        const uint first = s1_u32[e + E_ZERO_AT];
        const uint n     = s1_u32[e + E_ZERO_N];
        for (uint k = 0u; k < n; ++k) {
            d_u32[first + k] = 0u;
        }
    }
}
