// Shared by the matrix products: element k of a row of src0 (F32, F16 or
// a block type of quants.glsl) whose first byte is b, and the batch mapping.
#include "quants.glsl"

float a_elem(uint b, uint k) {
    const uint t = P.ty[0];
    if (t == TYPE_F32) {
        return s0_f32[(b + k * 4u) >> 2];
    }
    if (t == TYPE_F16) {
        return float(s0_f16[(b + k * 2u) >> 1]);
    }
    const uint qk = block_elems(t);
    return dequant(t, b + (k / qk) * P.nb[0], k % qk);
}

// Byte offset of row r of src0 in the matrix that batch (i12, i13) of src1
// multiplies: src0's dims 2 and 3 are repeated over src1's.
uint a_row(uint r, uint i12, uint i13) {
    const uint i02 = i12 / (P.ne[6] / P.ne[2]);
    const uint i03 = i13 / (P.ne[7] / P.ne[3]);
    return P.off[0] + r * P.nb[1] + i02 * P.nb[2] + i03 * P.nb[3];
}
