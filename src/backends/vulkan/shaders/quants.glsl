// The quantized block types src0 may hold (binding 1, read as 32-bit
// words): element j of the block whose first byte is b, computed as the
// CPU's dequantization computes it (src/core/types/: legacy.cpp,
// k_quants.cpp, i_quants.cpp), so that get_rows gives the CPU's bits.
// Layouts are ggml's; every block is a whole number of 16-bit halves and
// starts at an even byte offset (ops.cpp checks the strides).

const uint TYPE_Q4_1   = 3u;
const uint TYPE_Q5_0   = 6u;
const uint TYPE_Q5_1   = 7u;
const uint TYPE_Q2_K   = 10u;
const uint TYPE_Q3_K   = 11u;
const uint TYPE_Q4_K   = 12u;
const uint TYPE_Q5_K   = 13u;
const uint TYPE_Q6_K   = 14u;
const uint TYPE_IQ4_NL = 20u;
const uint TYPE_IQ4_XS = 23u;

// The IQ4_NL/IQ4_XS code book (kvalues_iq4nl of ggml-common.h).
const float IQ4_VALUES[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0,
                                       38.0, 53.0, 69.0, 89.0, 113.0);

// Values per block of type t.
uint block_elems(uint t) {
    return (t >= TYPE_Q2_K && t <= TYPE_Q6_K) || t == TYPE_IQ4_XS ? 256u : 32u;
}

uint q_byte(uint b) {
    return BYTE_OF(s0_u32, b);
}
float q_half(uint b) {
    return HALF_OF(s0_u32, b);
}

// Element j (0..31) of a 32-value block, its nibble from the 16 bytes at
// qs: low nibbles are elements 0..15, high nibbles 16..31.
uint nibble32(uint qs, uint j) {
    return (q_byte(qs + (j & 15u)) >> ((j >> 4) * 4u)) & 15u;
}

// Scale and min g (0..7) of a Q4_K/Q5_K block's 12 scale bytes at s.
uvec2 scale_min_k4(uint s, uint g) {
    if (g < 4u) {
        return uvec2(q_byte(s + g) & 63u, q_byte(s + g + 4u) & 63u);
    }
    return uvec2((q_byte(s + g + 4u) & 15u) | ((q_byte(s + g - 4u) >> 6) << 4),
                 (q_byte(s + g + 4u) >> 4) | ((q_byte(s + g) >> 6) << 4));
}

float dequant_legacy(uint t, uint b, uint j) {
    if (t == TYPE_Q4_1) {
        precise float v = float(nibble32(b + 4u, j)) * q_half(b) + q_half(b + 2u);
        return v;
    }
    if (t == TYPE_IQ4_NL) {
        return q_half(b) * IQ4_VALUES[nibble32(b + 2u, j)];
    }
    // Q5_0 / Q5_1: the fifth bit of element j is bit j of the 32-bit qh.
    const bool one = t == TYPE_Q5_1;
    const uint qh  = WORD_AT(s0_u32, b + (one ? 4u : 2u));
    const uint q   = nibble32(b + (one ? 8u : 6u), j) | (((qh >> j) & 1u) << 4);
    if (one) {
        precise float v = float(q) * q_half(b) + q_half(b + 2u);
        return v;
    }
    return float(int(q) - 16) * q_half(b);
}

float dequant_k(uint t, uint b, uint j) {
    if (t == TYPE_Q4_K || t == TYPE_Q5_K) {
        // 8 groups of 32; group g's nibbles in bytes 32 (g / 2) + l of qs,
        // low for even g; Q5_K's fifth bit is bit g of qh[l].
        const uint  g  = j / 32u, l = j % 32u;
        const uvec2 sm = scale_min_k4(b + 4u, g);
        const bool  k5 = t == TYPE_Q5_K;
        uint        q  = (q_byte(b + (k5 ? 48u : 16u) + 32u * (g / 2u) + l) >> (4u * (g % 2u))) & 15u;
        if (k5) {
            q += ((q_byte(b + 16u + l) >> g) & 1u) * 16u;
        }
        precise float dl = q_half(b) * float(sm.x);
        precise float ml = q_half(b + 2u) * float(sm.y);
        precise float v  = dl * float(q) - ml;
        return v;
    }
    if (t == TYPE_Q6_K) {
        // Halves of 128; in each, quarter g: low 4 bits from ql[l + 32 (g % 2)]
        // (nibble g / 2), high 2 bits from qh[l] (bits 2g), scale l / 16 + 2g.
        const uint h = j / 128u, g = (j % 128u) / 32u, l = j % 32u;
        const uint lo = (q_byte(b + 64u * h + l + 32u * (g % 2u)) >> (4u * (g / 2u))) & 15u;
        const uint hi = (q_byte(b + 128u + 32u * h + l) >> (2u * g)) & 3u;
        const int  sc = int(q_byte(b + 192u + 8u * h + l / 16u + 2u * g) << 24) >> 24;
        precise float ds = q_half(b + 208u) * float(sc);
        precise float v  = ds * float(int(lo | (hi << 4)) - 32);
        return v;
    }
    if (t == TYPE_IQ4_XS) {
        // 8 groups of 32 with 6-bit scales (low 4 bits in scales_l, high 2
        // in scales_h), offset 32; values from the IQ4_NL code book.
        const uint g  = j / 32u, r = j % 32u;
        const uint sh = (q_byte(b + 2u) | (q_byte(b + 3u) << 8)) >> (2u * g);
        const uint ls = ((q_byte(b + 4u + g / 2u) >> (4u * (g % 2u))) & 15u) | ((sh & 3u) << 4);
        precise float dl = q_half(b) * float(int(ls) - 32);
        precise float v  = dl * IQ4_VALUES[nibble32(b + 8u + 16u * g, r)];
        return v;
    }
    // Q2_K / Q3_K: 16 groups of 16; group g's 2-bit values in bytes
    // 32 (g / 8) + 16 (g % 2) + l of qs, shift 2 ((g / 2) % 4).
    const uint g = j / 16u, l = j % 16u;
    const uint qs = t == TYPE_Q2_K ? b + 16u : b + 32u;
    const uint q  = (q_byte(qs + 32u * (g / 8u) + 16u * (g % 2u) + l) >> (2u * ((g / 2u) % 4u))) & 3u;
    if (t == TYPE_Q2_K) {
        const uint    sc = q_byte(b + g);
        precise float dl = q_half(b + 80u) * float(sc & 15u);
        precise float ml = q_half(b + 82u) * float(sc >> 4);
        precise float v  = dl * float(q) - ml;
        return v;
    }
    // Q3_K: the third bit is bit g / 2 of hmask[16 (g % 2) + l] (set: no
    // offset, clear: -4); 6-bit scales, offset 32.
    const uint s    = b + 96u;
    const uint low  = g < 8u ? q_byte(s + g) & 15u : q_byte(s + g - 8u) >> 4;
    const uint high = (q_byte(s + 8u + g % 4u) >> (2u * (g / 4u))) & 3u;
    const bool set  = ((q_byte(b + 16u * (g % 2u) + l) >> (g / 2u)) & 1u) != 0u;
    precise float dl = q_half(b + 108u) * float(int(low | (high << 4)) - 32);
    precise float v  = dl * float(int(q) - (set ? 0 : 4));
    return v;
}

// Element j of the block of type t at byte b of src0.
float dequant(uint t, uint b, uint j) {
    if (t == TYPE_Q8_0 || t == TYPE_Q4_0) {
        return QUANT_ELEM(s0_u32, t, b, j);
    }
    if ((t >= TYPE_Q2_K && t <= TYPE_Q6_K) || t == TYPE_IQ4_XS) {
        return dequant_k(t, b, j);
    }
    return dequant_legacy(t, b, j);
}

// The 16 bytes from an even byte offset o of src0, as four words.
uvec4 words16(uint o) {
    return uvec4(WORD_AT(s0_u32, o), WORD_AT(s0_u32, o + 4u), WORD_AT(s0_u32, o + 8u), WORD_AT(s0_u32, o + 12u));
}
uint byte_of(uvec4 w, uint i) {
    return (w[i >> 2] >> (8u * (i & 3u))) & 0xFFu;
}

// Elements 16 c .. 16 c + 15 of the block of type t (not Q8_0 or Q4_0) at
// byte b, for the matrix-vector products: every type's scales cover 16
// values or more, so they are decoded once per call and the quants read a
// word at a time. The values are those of dequant().
void dequant16(uint t, uint b, uint c, out float v[16]) {
    if (t == TYPE_Q4_1 || t == TYPE_Q5_0 || t == TYPE_Q5_1 || t == TYPE_IQ4_NL) {
        const bool  has_min = t == TYPE_Q4_1 || t == TYPE_Q5_1;
        const bool  five    = t == TYPE_Q5_0 || t == TYPE_Q5_1;
        const uint  qs      = b + (t == TYPE_IQ4_NL ? 2u : t == TYPE_Q4_1 ? 4u : t == TYPE_Q5_0 ? 6u : 8u);
        const uint  qh      = five ? WORD_AT(s0_u32, b + (t == TYPE_Q5_1 ? 4u : 2u)) >> (16u * c) : 0u;
        const uvec4 w       = words16(qs);
        const float d       = q_half(b);
        const float m       = has_min ? q_half(b + 2u) : 0.0;
        [[unroll]] for (uint i = 0u; i < 16u; ++i) {
            const uint q = ((byte_of(w, i) >> (4u * c)) & 15u) | (((qh >> i) & 1u) << 4);
            if (t == TYPE_IQ4_NL) {
                v[i] = d * IQ4_VALUES[q];
            } else if (has_min) {
                precise float x = float(q) * d + m;
                v[i]            = x;
            } else {
                v[i] = float(int(q) - 16) * d;
            }
        }
        return;
    }
    if (t == TYPE_Q4_K || t == TYPE_Q5_K) {
        const uint    g  = c / 2u, l0 = 16u * (c % 2u);
        const uvec2   sm = scale_min_k4(b + 4u, g);
        const bool    k5 = t == TYPE_Q5_K;
        const uvec4   w  = words16(b + (k5 ? 48u : 16u) + 32u * (g / 2u) + l0);
        const uvec4   h  = k5 ? words16(b + 16u + l0) : uvec4(0u);
        precise float dl = q_half(b) * float(sm.x);
        precise float ml = q_half(b + 2u) * float(sm.y);
        [[unroll]] for (uint i = 0u; i < 16u; ++i) {
            const uint    q = ((byte_of(w, i) >> (4u * (g % 2u))) & 15u) + ((byte_of(h, i) >> g) & 1u) * 16u;
            precise float x = dl * float(q) - ml;
            v[i]            = x;
        }
        return;
    }
    if (t == TYPE_Q6_K) {
        const uint    hf = c / 8u, g = (c % 8u) / 2u, l0 = 16u * (c % 2u);
        const uvec4   lo = words16(b + 64u * hf + l0 + 32u * (g % 2u));
        const uvec4   hi = words16(b + 128u + 32u * hf + l0);
        const int     sc = int(q_byte(b + 192u + 8u * hf + c % 2u + 2u * g) << 24) >> 24;
        precise float ds = q_half(b + 208u) * float(sc);
        [[unroll]] for (uint i = 0u; i < 16u; ++i) {
            const uint    q = ((byte_of(lo, i) >> (4u * (g / 2u))) & 15u) | (((byte_of(hi, i) >> (2u * g)) & 3u) << 4);
            precise float x = ds * float(int(q) - 32);
            v[i]            = x;
        }
        return;
    }
    if (t == TYPE_IQ4_XS) {
        const uint    g  = c / 2u;
        const uint    sh = (q_byte(b + 2u) | (q_byte(b + 3u) << 8)) >> (2u * g);
        const uint    ls = ((q_byte(b + 4u + g / 2u) >> (4u * (g % 2u))) & 15u) | ((sh & 3u) << 4);
        const uvec4   w  = words16(b + 8u + 16u * g);
        precise float dl = q_half(b) * float(int(ls) - 32);
        [[unroll]] for (uint i = 0u; i < 16u; ++i) {
            precise float x = dl * IQ4_VALUES[(byte_of(w, i) >> (4u * (c % 2u))) & 15u];
            v[i]            = x;
        }
        return;
    }
    // Q2_K / Q3_K: call c is group c.
    const uint  g     = c;
    const uint  shift = 2u * ((g / 2u) % 4u);
    const uvec4 w     = words16(b + (t == TYPE_Q2_K ? 16u : 32u) + 32u * (g / 8u) + 16u * (g % 2u));
    if (t == TYPE_Q2_K) {
        const uint    sc = q_byte(b + g);
        precise float dl = q_half(b + 80u) * float(sc & 15u);
        precise float ml = q_half(b + 82u) * float(sc >> 4);
        [[unroll]] for (uint i = 0u; i < 16u; ++i) {
            precise float x = dl * float((byte_of(w, i) >> shift) & 3u) - ml;
            v[i]            = x;
        }
        return;
    }
    const uint    s    = b + 96u;
    const uint    low  = g < 8u ? q_byte(s + g) & 15u : q_byte(s + g - 8u) >> 4;
    const uint    high = (q_byte(s + 8u + g % 4u) >> (2u * (g / 4u))) & 3u;
    const uvec4   hm   = words16(b + 16u * (g % 2u));
    precise float dl   = q_half(b + 108u) * float(int(low | (high << 4)) - 32);
    [[unroll]] for (uint i = 0u; i < 16u; ++i) {
        const bool    set = ((byte_of(hm, i) >> (g / 2u)) & 1u) != 0u;
        precise float x   = dl * float(int((byte_of(w, i) >> shift) & 3u) - (set ? 0 : 4));
        v[i]              = x;
    }
}
