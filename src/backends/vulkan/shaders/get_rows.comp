#version 450
// dst[i0, i, j, k] = src0[i0, idx[i, j, k], j, k], idx = src1 (I32); src0
// F32, F16 or a block type of quants.glsl into F32, or I32 into I32. One
// invocation per element of dst. The indices were checked before this runs
// (check_indices.comp); a row outside src0's anyway (a negative index reads
// as a large one) is left as it was, so no read leaves the tensor.
#include "common.glsl"
#include "quants.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint g = group_index() * 256u + gl_LocalInvocationID.x;
    if (g >= P.n) {
        return;
    }
    const uvec4 d   = coords(3u, g);
    const uint  row = s1_u32[at(1u, d.y, d.z, d.w, 0u) >> 2];
    if (row >= P.ne[1]) {
        return;
    }
    const uint  t   = P.ty[0];
    const uint  db  = at(3u, d.x, d.y, d.z, d.w);
    if (t == TYPE_I32) {
        d_u32[db >> 2] = s0_u32[at(0u, d.x, row, d.z, d.w) >> 2];
    } else if (t != TYPE_F32 && t != TYPE_F16) {
        const uint qk = block_elems(t);
        store_d(db, dequant(t, at(0u, d.x / qk, row, d.z, d.w), d.x % qk));
    } else {
        store_d(db, load_s0(at(0u, d.x, row, d.z, d.w)));
    }
}
