#version 450
// dst[i0, idx[i1, i2 % n11, i3 % n12], i2, i3] = src0[i0, i1, i2, i3],
// idx = src1 (I64 read by its low word, or I32); src0 F32 or F16 into F32
// or F16. One invocation per element of src0. The indices were checked
// before this runs (check_indices.comp); an index outside dst's rows anyway
// (a negative one, or an I64 one whose high word is not zero, included)
// writes nothing, so no write leaves the tensor.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint g = group_index() * 256u + gl_LocalInvocationID.x;
    if (g >= P.n) {
        return;
    }
    const uvec4 s   = coords(0u, g);
    const uint  ib  = at(1u, s.y, s.z % P.ne[5], s.w % P.ne[6], 0u) >> 2;
    const uint  row = s1_u32[ib];
    if (row >= P.ne[13] || (P.ty[1] == TYPE_I64 && s1_u32[ib + 1u] != 0u)) {
        return;
    }
    store_d(at(3u, s.x, row, s.z, s.w), load_s0(at(0u, s.x, s.y, s.z, s.w)));
}
