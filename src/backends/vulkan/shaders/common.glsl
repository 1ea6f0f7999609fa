// Shared by every shader: the parameter block, the tensor bindings and the
// element loads and stores.
//
// Binding 0 holds the parameters of one dispatch (written by the host into
// a staging buffer; layout mirrored by struct Params in shaders.h). Bindings 1-4
// are whole device buffers holding src0, src1, src2 and dst; tensors are
// found in them by byte offset and byte strides, so views and non-contiguous
// layouts need no special cases. Each binding is declared once per element
// type (F32, F16, 32-bit words); the host only reads a binding through the
// declaration that matches the tensor's type.

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable

layout(std430, binding = 0) buffer ParamBlock {
    uint  ne[16]; // [4 * slot + dim]: slot 0..2 = src0..src2, 3 = dst
    uint  nb[16]; // byte strides, same indexing
    uint  off[4]; // byte offset of each slot's first element in its binding
    uint  ty[4];  // ggml_type of each slot
    uint  op;     // which variant of the shader's operation
    uint  n;      // number of work items
    uint  ip[6];  // integer parameters
    float fp[8];  // float parameters
} P;

layout(std430, binding = 1) buffer S0F { float s0_f32[]; };
layout(std430, binding = 1) buffer S0H { float16_t s0_f16[]; };
layout(std430, binding = 1) buffer S0U { uint s0_u32[]; };
layout(std430, binding = 2) buffer S1F { float s1_f32[]; };
layout(std430, binding = 2) buffer S1H { float16_t s1_f16[]; };
layout(std430, binding = 2) buffer S1U { uint s1_u32[]; };
layout(std430, binding = 3) buffer S2F { float s2_f32[]; };
layout(std430, binding = 3) buffer S2H { float16_t s2_f16[]; };
layout(std430, binding = 3) buffer S2U { uint s2_u32[]; };
layout(std430, binding = 4) buffer DF { float d_f32[]; };
layout(std430, binding = 4) buffer DH { float16_t d_f16[]; };
layout(std430, binding = 4) buffer DU { uint d_u32[]; };

const uint TYPE_F32  = 0u;
const uint TYPE_F16  = 1u;
const uint TYPE_Q4_0 = 2u;
const uint TYPE_Q8_0 = 8u;
const uint TYPE_I32  = 26u;
const uint TYPE_I64  = 27u;

// The index of this workgroup when the host spread a long 1-D dispatch over
// x and y (x at most 65535 groups).
uint group_index() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

// Byte offset of element (i0, i1, i2, i3) of slot s.
uint at(uint s, uint i0, uint i1, uint i2, uint i3) {
    return P.off[s] + i0 * P.nb[4 * s] + i1 * P.nb[4 * s + 1] + i2 * P.nb[4 * s + 2] + i3 * P.nb[4 * s + 3];
}

// Splits a linear element index into coordinates of slot s's shape.
uvec4 coords(uint s, uint i) {
    const uint n0 = P.ne[4 * s], n1 = P.ne[4 * s + 1], n2 = P.ne[4 * s + 2];
    const uint i0 = i % n0;
    i /= n0;
    const uint i1 = i % n1;
    i /= n1;
    const uint i2 = i % n2;
    return uvec4(i0, i1, i2, i / n2);
}

// A byte of a word array, and the F16 value at an even byte offset.
#define BYTE_OF(arr, b) ((arr[(b) >> 2] >> (8u * ((b) & 3u))) & 0xFFu)
#define HALF_OF(arr, b) (unpackHalf2x16(arr[(b) >> 2] >> (16u * (((b) >> 1) & 1u))).x)

// The 4 bytes from an even byte offset b of a word array: one word, or the
// halves of two.
#define WORD_AT(arr, b) \
    (((b) & 2u) == 0u ? arr[(b) >> 2] : ((arr[(b) >> 2] >> 16) | (arr[((b) >> 2) + 1u] << 16)))

// Element j (0..31) of the Q8_0 or Q4_0 block starting at byte b:
// Q8_0 = F16 scale + 32 signed bytes; Q4_0 = F16 scale + 16 bytes whose low
// nibbles are elements 0..15 and high nibbles 16..31, value (q - 8) * d.
#define QUANT_ELEM(arr, type, b, j) \
    ((type) == TYPE_Q8_0 \
         ? HALF_OF(arr, b) * float(int(BYTE_OF(arr, (b) + 2u + (j)) << 24) >> 24) \
         : HALF_OF(arr, b) * (float((BYTE_OF(arr, (b) + 2u + ((j) & 15u)) >> (((j) >> 4) * 4u)) & 15u) - 8.0))

float load_s0(uint b) {
    const uint t = P.ty[0];
    return t == TYPE_F32 ? s0_f32[b >> 2] : float(s0_f16[b >> 1]);
}
float load_s1(uint b) {
    const uint t = P.ty[1];
    return t == TYPE_F32 ? s1_f32[b >> 2] : float(s1_f16[b >> 1]);
}
float load_s2(uint b) {
    const uint t = P.ty[2];
    return t == TYPE_F32 ? s2_f32[b >> 2] : float(s2_f16[b >> 1]);
}
float load_d(uint b) {
    return P.ty[3] == TYPE_F32 ? d_f32[b >> 2] : float(d_f16[b >> 1]);
}
void store_d(uint b, float v) {
    if (P.ty[3] == TYPE_F32) {
        d_f32[b >> 2] = v;
    } else {
        d_f16[b >> 1] = float16_t(v);
    }
}
