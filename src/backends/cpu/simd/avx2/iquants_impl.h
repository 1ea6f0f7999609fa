// The matrix-vector products of the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and the ternary types (TQ2_0, TQ1_0)
// against Q8_K on 256-bit integer instructions, written once for two
// tables as kquants_impl.h is: avx2/iquants.cpp includes this file inside
// namespace loom::cpu::avx2 under the AVX2 target, avx512/iquants.cpp
// inside loom::cpu::avx512 under the AVX-512 target. Include only between a
// target_begin.h and its target_end.h, after <immintrin.h>, <cstring>,
// core/types/i_quants.h, core/types/iq_tables.h, core/types/legacy_k.h,
// core/types/other.h and kernel_table.h, inside the ISA's namespace.
//
// Note [I-quant products]
// Each of these types is, per super-block, a float scale times a signed
// integer level times an odd integer scale per group of 16 (the forms of
// kernels/iquant_dot.cpp, whose integer sums these are): grid bytes with
// their signs (|level| <= 62), 8 g + delta for IQ1_S and IQ1_M (|level| <=
// 9), q - 1 for the ternary types. A super-block is decoded into eight
// registers of 32 signed levels, in the order of the column's values, and
// the scales of the two groups of 16 each register holds (int16 lanes 0-7
// and 8-15); the levels meet the column's bytes through the sign trick
// (maddubs of |level| with the column's bytes carrying the level's sign:
// |pair| <= 2 * 62 * 127, no saturation; y is never -128), madd with the
// scales gives exact int32 sums, and the block's total adds d * y.d * isum
// (Note [Block totals]), d carrying the type's constant factor (1/8, 1/4, a
// power of two). The grids
// are read with gathers of the entries the indices name, or with scalar
// loads where those are faster (IQ2_XXS, IQ2_XS) (indices masked to the
// grid's size, so any bytes decode), the sign patterns expanded to bytes by
// a shuffle and a bit test; where the levels are not stored, they meet the
// columns as they are decoded (Note [Grid levels and signs apart]). A super-block is decoded once per row
// and meets every column of the call (up to GEMV_MAX_COLS); only the order
// of the f32 additions differs from the portable dot products.

#include "block_totals.h"

namespace {

inline __m256i iq_load(const void * p) {
    return _mm256_loadu_si256(static_cast<const __m256i *>(p));
}

inline uint32_t iq_u32(const void * p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Eight bytes into the low half of a register.
inline __m128i iq_bytes8(const void * p) {
    return _mm_loadl_epi64(static_cast<const __m128i *>(p));
}

inline float iq_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// One super-block of weights, decoded (Note [I-quant products]).
struct IDecoded {
    __m256i q[8];  // signed levels of values 32j .. 32j + 31
    __m256i sc[8]; // int16 scales of groups 2j (lanes 0-7) and 2j + 1 (8-15)
    float   d;     // the block's scale times the type's constant factor
    // Register j from the grid's (positive) levels, their sign bytes and
    // the two groups' scales (the decoders of grid types with sign patterns).
    inline void set(int j, __m256i grid, __m256i signs, __m256i scales);
    inline void set(int j, __m256i grid, uint32_t signs, __m256i scales) {
        set(j, grid, _mm256_set1_epi32(int(signs)), scales);
    }
    // Register j from unsigned bytes u, the levels less offset (IQ1_S and
    // IQ1_M: Note [IQ1 levels unsigned]), then the factors of the column's
    // sums of 16 that take the offsets off in the fused products.
    void set_biased(int j, __m256i u, __m256i scales, __m256i offset) {
        q[j]  = _mm256_add_epi8(u, offset);
        sc[j] = scales;
    }
    void add_bsums(__m256i) {}
};

// The scales of a register's two groups of 16.
inline __m256i iq_scales(int first, int second) {
    return _mm256_set_m128i(_mm_set1_epi16(int16_t(second)), _mm_set1_epi16(int16_t(first)));
}

// The odd scale 2s + 1 of a scale field.
inline int iq_odd(unsigned s) {
    return int(2 * s + 1);
}

// The 32 levels of four 8-value grid entries of the 64-bit grid, the
// indices in the four int32 of idx.
inline __m256i iq_grid64(const uint64_t * grid, __m128i idx) {
    return _mm256_i32gather_epi64(reinterpret_cast<const long long *>(grid), idx, 8);
}

// The same from four indices in general registers: scalar loads beat a
// gather of four here (IQ2_XXS with one column: 22.0 against 24.0-25.2
// GFLOP/s on an Intel Xeon, family 6 model 207).
inline __m256i iq_grid64(const uint64_t * grid, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
    return _mm256_set_epi64x(int64_t(grid[i3]), int64_t(grid[i2]), int64_t(grid[i1]), int64_t(grid[i0]));
}

// The same for eight 4-value entries of a 32-bit grid.
inline __m256i iq_grid32(const uint32_t * grid, __m256i idx) {
    return _mm256_i32gather_epi32(reinterpret_cast<const int *>(grid), idx, 4);
}

// -1 or +1 in every byte by the signs of four sign bytes (bytes 0-3 of
// every 128-bit lane of s: byte l for values 8l .. 8l + 7, bit j for value
// 8l + j: set is negative).
inline __m256i iq_sign_ones(__m256i s) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bits   = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    const __m256i bytes  = _mm256_shuffle_epi8(s, spread);
    const __m256i neg    = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

inline void IDecoded::set(int j, __m256i grid, __m256i signs, __m256i scales) {
    q[j]  = _mm256_sign_epi8(grid, iq_sign_ones(signs));
    sc[j] = scales;
}

// Note [Grid levels and signs apart]
// The grid types with sign patterns (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S) have positive grid levels (8 .. 62). Where the levels are not
// stored, each register of them meets the columns as the decoder gives it
// (IFused: no decoded super-block kept beside the columns' sums), unsigned,
// and the column's bytes take the signs instead (maddubs of the grid levels
// with y * sign): one instruction per register and column where signing
// the levels and the sign trick take three (sign, abs, sign). The int16
// products are the same, so the sums are.
template <int C> struct IFused {
    const block_q8_K * const * bc;
    int64_t                    i;     // the block of the columns
    __m256i                    isum[C];
    float                      d;
    void set(int j, __m256i grid, __m256i signs, __m256i scales) {
        const __m256i ones = iq_sign_ones(signs);
        for (int c = 0; c < C; ++c) {
            const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bc[c][i].qs + 32 * j));
            const __m256i p = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(y, ones));
            isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, scales));
        }
    }
    void set(int j, __m256i grid, uint32_t signs, __m256i scales) { set(j, grid, _mm256_set1_epi32(int(signs)), scales); }
    void set_biased(int j, __m256i u, __m256i scales, __m256i) {
        for (int c = 0; c < C; ++c) {
            const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bc[c][i].qs + 32 * j));
            isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), scales));
        }
    }
    void add_bsums(__m256i f16) {
        for (int c = 0; c < C; ++c) {
            const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bc[c][i].bsums));
            isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(b, f16));
        }
    }
};

// Note [IQ1 levels unsigned]
// IQ1_S and IQ1_M levels are 8 g + delta (g -1, 0 or 1, delta +-1). Where
// they are not stored, the decoders give unsigned bytes u = level - offset
// that meet the column's bytes through maddubs directly, and the offsets
// come back through the column's sums of 16: sum sc (u + o) y = sum sc u y
// + sum_g sc_g o_g bsums_g, one madd per block and column with the factors
// sc_g o_g. IQ1_S's delta is one per group of 32, so u = 8 g + 8 (0, 8,
// 16) and o = delta - 8 (no delta per register); IQ1_M's is one per eight
// values, so u = level + 9 (0 .. 18) and o = -9. The block's total is the
// same exact integer.


// Note [Sign patterns in lanes]
// IQ2_XXS, IQ2_XS and IQ3_XXS give each eight values a 7-bit pattern k,
// whose sign byte (ksigns_iq2xs) is k with its parity in bit 7, so that an
// even count of values is negative. The decoders compute the sign bytes of
// a whole super-block in one register, byte 4g + l for values 8l .. 8l + 7
// of group g, the parity by a nibble table, and each group takes its
// dword with a permute: no table lookups and no moves from general
// registers.
inline __m256i iq_sign_bytes(__m256i k) {
    const __m256i odd = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0,
                                         -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    const __m256i m4  = _mm256_set1_epi8(0x0f);
    const __m256i p   = _mm256_xor_si256(_mm256_shuffle_epi8(odd, _mm256_and_si256(k, m4)),
                                         _mm256_shuffle_epi8(odd, _mm256_and_si256(_mm256_srli_epi16(k, 4), m4)));
    return _mm256_or_si256(k, p);
}
// The sign bytes of the four 7-bit patterns at bits 0, 7, 14, 21 of each
// int32 lane of m (IQ2_XXS and IQ3_XXS), byte l of the lane for pattern l.
inline __m256i iq_sign_bytes28(__m256i m) {
    const __m256i f0 = _mm256_and_si256(m, _mm256_set1_epi32(0x7f));
    const __m256i f1 = _mm256_and_si256(_mm256_slli_epi32(m, 1), _mm256_set1_epi32(0x7f00));
    const __m256i f2 = _mm256_and_si256(_mm256_slli_epi32(m, 2), _mm256_set1_epi32(0x7f0000));
    const __m256i f3 = _mm256_and_si256(_mm256_slli_epi32(m, 3), _mm256_set1_epi32(0x7f000000));
    return iq_sign_bytes(_mm256_or_si256(_mm256_or_si256(f0, f1), _mm256_or_si256(f2, f3)));
}
// Dword g of v in every lane.
inline __m256i iq_lane(__m256i v, int g) {
    return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(g));
}
// The odd scales 2 (m >> 28) + 1 of each int32 lane of m in both its int16
// halves.
inline __m256i iq_odd_scales28(__m256i m) {
    const __m256i odd = _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(m, 28), 1), _mm256_set1_epi32(1));
    return _mm256_or_si256(odd, _mm256_slli_epi32(odd, 16));
}

struct IQ2XXSDecoder {
    using W                       = block_iq2_xxs;
    static constexpr float factor = 0.125f;
    template <class O> static void decode(const W & x, O & o) {
        // Group g: four grid indices in bytes 8g .. 8g + 3 of qs, then a
        // word of four sign patterns and the scale; the words of groups
        // 0-7 gathered into one register (the odd dwords of qs).
        const __m256i a     = iq_load(x.qs), b = iq_load(x.qs + 16);
        const __m256i meta  = _mm256_permute4x64_epi64(
            _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0xdd)), 0xd8);
        const __m256i signs = iq_sign_bytes28(meta);
        const __m256i sc    = iq_odd_scales28(meta);
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            const uint32_t idx  = iq_u32(x.qs + 4 * g); // four grid indices
            const __m256i  grid = iq_grid64(iq::iq2xxs_grid, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24);
            o.set(g, grid, iq_lane(signs, g), iq_lane(sc, g));
        }
        o.d = factor * _cvtsh_ss(x.d);
    }
};

struct IQ2XSDecoder {
    using W                       = block_iq2_xs;
    static constexpr float factor = 0.125f;
    template <class O> static void decode(const W & x, O & o) {
        // Each uint16 of qs: a 9-bit grid index, a 7-bit sign pattern
        // above it; the patterns of the block's 32 in bytes, in order.
        const __m256i k16   = _mm256_packus_epi16(_mm256_srli_epi16(iq_load(x.qs), 9),
                                                  _mm256_srli_epi16(iq_load(x.qs + 16), 9));
        const __m256i signs = iq_sign_bytes(_mm256_permute4x64_epi64(k16, 0xd8));
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            uint64_t q;
            std::memcpy(&q, x.qs + 4 * g, sizeof q);
            const __m256i grid = iq_grid64(iq::iq2xs_grid, uint32_t(q & 511), uint32_t((q >> 16) & 511),
                                           uint32_t((q >> 32) & 511), uint32_t((q >> 48) & 511));
            o.set(g, grid, iq_lane(signs, g), iq_scales(iq_odd(x.scales[g] & 0xf), iq_odd(x.scales[g] >> 4)));
        }
        o.d = factor * _cvtsh_ss(x.d);
    }
};

struct IQ2SDecoder {
    using W                       = block_iq2_s;
    static constexpr float factor = 0.125f;
    template <class O> static void decode(const W & x, O & o) {
        // The 16 odd scales (group 2g: the low nibble of scales[g], 2g + 1 the
        // high one) in the int16 lanes of one register, then each register's two.
        const __m128i b8   = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(x.scales));
        const __m128i nib  = _mm_unpacklo_epi8(_mm_and_si128(b8, _mm_set1_epi8(0x0f)),
                                               _mm_and_si128(_mm_srli_epi16(b8, 4), _mm_set1_epi8(0x0f)));
        const __m256i s16  = _mm256_cvtepu8_epi16(nib);
        const __m256i odd  = _mm256_or_si256(_mm256_add_epi16(s16, s16), _mm256_set1_epi16(1));
        const __m256i lo8  = _mm256_permute4x64_epi64(odd, 0x44);
        const __m256i hi8  = _mm256_permute4x64_epi64(odd, 0xee);
        const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        const __m256i m3     = _mm256_set1_epi32(3);
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            // Groups 2p and 2p + 1, entries e = 0..7 (l = e % 4 of group 2p
            // + e / 4): byte 8p + e of qs, bits 2l, 2l + 1 of the group's qh
            // above it (the 16 bits of qh[2p], qh[2p + 1]).
            uint16_t qh2;
            std::memcpy(&qh2, x.qh + 2 * p, sizeof qh2);
            const __m256i idx = _mm256_or_si256(
                _mm256_cvtepu8_epi32(iq_bytes8(x.qs + 8 * p)),
                _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(qh2), shifts), m3), 8));
            for (int k = 0; k < 2; ++k) {
                const int     g    = 2 * p + k;
                const __m256i grid = iq_grid64(iq::iq2s_grid, k == 0 ? _mm256_castsi256_si128(idx)
                                                                     : _mm256_extracti128_si256(idx, 1));
                o.set(g, grid, iq_u32(x.qs + QK_K / 8 + 4 * g), group_scales16(lo8, hi8, g));
            }
        }
        o.d = factor * _cvtsh_ss(x.d);
    }
};

struct IQ3XXSDecoder {
    using W                       = block_iq3_xxs;
    static constexpr float factor = 0.25f;
    template <class O> static void decode(const W & x, O & o) {
        // The words of four sign patterns and a scale, one per group.
        const __m256i meta  = iq_load(x.qs + QK_K / 4);
        const __m256i signs = iq_sign_bytes28(meta);
        const __m256i sc    = iq_odd_scales28(meta);
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            const __m256i idx = _mm256_cvtepu8_epi32(iq_bytes8(x.qs + 8 * g));
            o.set(g, iq_grid32(iq::iq3xxs_grid, idx), iq_lane(signs, g), iq_lane(sc, g));
        }
        o.d = factor * _cvtsh_ss(x.d);
    }
};

struct IQ3SDecoder {
    using W                       = block_iq3_s;
    static constexpr float factor = 1.0f;
    template <class O> static void decode(const W & x, O & o) {
        const __m256i shifts = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i one    = _mm256_set1_epi32(1);
        for (int g = 0; g < 8; ++g) {
            // Index k: byte k of qs, bit k of qh above it.
            const __m256i lo  = _mm256_cvtepu8_epi32(iq_bytes8(x.qs + 8 * g));
            const __m256i hi  = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x.qh[g]), shifts), one);
            const __m256i idx = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 8));
            const uint8_t sc  = x.scales[g / 2];
            const int     ls  = iq_odd(g % 2 ? sc >> 4 : sc & 0xf);
            o.set(g, iq_grid32(iq::iq3s_grid, idx), iq_u32(x.signs + 4 * g), _mm256_set1_epi16(int16_t(ls)));
        }
        o.d = factor * _cvtsh_ss(x.d);
    }
};

// IQ1 levels are 8 g + delta, g the grid's signed bytes (-1, 0, 1), delta
// +-1: the decoders read the grid times 8 (iq::iq1s_grid8) and add delta.

struct IQ1SDecoder {
    using W                       = block_iq1_s;
    static constexpr float factor = 0.125f;
    template <class O> static void decode(const W & x, O & o) {
        // Per group of 16 (bsums' order): the odd scale of its group of 32
        // (bits 12-14 of qh) and the offset delta - 8 (-9 where bit 15 is
        // set, else -7).
        const __m128i h     = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.qh));
        const __m128i s8    = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 12), _mm_set1_epi16(7)), 1),
                                           _mm_set1_epi16(1));
        const __m128i neg   = _mm_srai_epi16(h, 15);
        const __m128i o8    = _mm_add_epi16(_mm_set1_epi16(-7), _mm_add_epi16(neg, neg));
        const __m256i sc16  = _mm256_set_m128i(_mm_unpackhi_epi16(s8, s8), _mm_unpacklo_epi16(s8, s8));
        const __m256i off16 = _mm256_set_m128i(_mm_unpackhi_epi16(o8, o8), _mm_unpacklo_epi16(o8, o8));
        const __m256i lo8   = _mm256_permute4x64_epi64(sc16, 0x44);
        const __m256i hi8   = _mm256_permute4x64_epi64(sc16, 0xee);
        const __m256i eight = _mm256_set1_epi8(8);
        const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 16, 19, 22, 25);
        const __m256i m7     = _mm256_set1_epi32(7);
        for (int p = 0; p < 4; ++p) {
            // Groups 2p and 2p + 1, entries e = 0..7 (l = e % 4 of group 2p
            // + e / 4): byte 8p + e of qs, bits 3l .. 3l + 2 of the group's
            // qh above it; qh's bits 12-14 the scale, bit 15 the delta's sign.
            const uint32_t qh2 = iq_u32(x.qh + 2 * p);
            const __m256i  idx = _mm256_or_si256(
                _mm256_cvtepu8_epi32(iq_bytes8(x.qs + 8 * p)),
                _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(qh2)), shifts), m7), 8));
            for (int k = 0; k < 2; ++k) {
                const uint16_t qh    = uint16_t(qh2 >> (16 * k));
                const __m256i  grid8 = iq_grid64(iq::iq1s_grid8.v, k == 0 ? _mm256_castsi256_si128(idx)
                                                                          : _mm256_extracti128_si256(idx, 1));
                const int     g     = 2 * p + k;
                o.set_biased(g, _mm256_add_epi8(grid8, eight), group_scales16(lo8, hi8, g),
                             _mm256_set1_epi8(qh & 0x8000 ? -9 : -7));
            }
        }
        o.add_bsums(_mm256_mullo_epi16(sc16, off16));
        o.d = factor * _cvtsh_ss(x.d);
    }
};

// The 16 odd scales 2 s + 1 of IQ1_M's four scale words (group of 16 s:
// bits 3 (s % 4) of word s / 4) in the int16 lanes of one register: each
// word copied to its four lanes by one shuffle, each lane's field moved to
// the top by a multiply with a power of two and down by a shift.
inline __m256i iq1m_scales16(const uint8_t * scales) {
    const __m256i w    = _mm256_broadcastsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(scales)));
    const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6,
                                          7, 6, 7, 6, 7);
    const __m256i up   = _mm256_setr_epi16(8192, 1024, 128, 16, 8192, 1024, 128, 16, 8192, 1024, 128, 16, 8192, 1024,
                                           128, 16);
    const __m256i s3   = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(w, pick), up), 13);
    return _mm256_or_si256(_mm256_add_epi16(s3, s3), _mm256_set1_epi16(1));
}

struct IQ1MDecoder {
    using W                       = block_iq1_m;
    static constexpr float factor = 0.125f;
    template <class O> static void decode(const W & x, O & o) {
        uint16_t sc[4];
        std::memcpy(sc, x.scales, sizeof sc);
        // Register g: the scales of groups 2g (lanes 0-7) and 2g + 1 (8-15).
        const __m256i s16    = iq1m_scales16(x.scales);
        const __m256i lo8    = _mm256_permute4x64_epi64(s16, 0x44); // lanes 0-7 in both halves
        const __m256i hi8    = _mm256_permute4x64_epi64(s16, 0xee); // lanes 8-15 in both halves
        const __m256i nibble = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        const __m256i m7 = _mm256_set1_epi32(7), m8 = _mm256_set1_epi32(8), one = _mm256_set1_epi8(1);
        const __m256i nine = _mm256_set1_epi8(9);
        for (int p = 0; p < 4; ++p) {
            // Groups 2p and 2p + 1, entries e = 0..7: byte 8p + e of qs, above
            // it the three low bits of nibble e of the word at qh + 4p (qh[2g
            // + l / 2]'s low nibble for l even, high for l odd); the nibble's
            // fourth bit is the sign of the delta of the entry's eight values.
            const __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32(int(iq_u32(x.qh + 4 * p))), nibble);
            const __m256i idx = _mm256_or_si256(_mm256_cvtepu8_epi32(iq_bytes8(x.qs + 8 * p)),
                                                _mm256_slli_epi32(_mm256_and_si256(nib, m7), 8));
            const __m256i neg = _mm256_cmpeq_epi32(_mm256_and_si256(nib, m8), m8); // entry e's lane: -1 where negative
            for (int k = 0; k < 2; ++k) {
                // Entries 4k .. 4k + 3, each sign over its eight bytes.
                const __m256i grid8 = iq_grid64(iq::iq1s_grid8.v, k == 0 ? _mm256_castsi256_si128(idx)
                                                                         : _mm256_extracti128_si256(idx, 1));
                const __m256i spread =
                    _mm256_setr_epi32(4 * k, 4 * k, 4 * k + 1, 4 * k + 1, 4 * k + 2, 4 * k + 2, 4 * k + 3, 4 * k + 3);
                const __m256i delta = _mm256_or_si256(_mm256_permutevar8x32_epi32(neg, spread), one);
                o.set_biased(2 * p + k, _mm256_add_epi8(_mm256_add_epi8(grid8, delta), nine),
                             group_scales16(lo8, hi8, 2 * p + k), _mm256_set1_epi8(-9));
            }
        }
        o.add_bsums(_mm256_mullo_epi16(s16, _mm256_set1_epi16(-9)));
        // The fp16 scale: the top nibble of each of the four scale words.
        const uint16_t d =
            uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        o.d = factor * _cvtsh_ss(d);
    }
};

// Note [Ternary products]
// TQ2_0 and TQ1_0 hold a digit t of 0..2 per weight, whose level is t - 1,
// and no group scales. Their products take the digits as they are:
// sum (t - 1) y = sum t y - sum y. maddubs multiplies the unsigned digits
// with the column's bytes (|pair| <= 2 * 2 * 127), the eight registers'
// pairs add in int16 (at most 8 * 508 in magnitude), one madd with ones
// widens them, and the column's bsums, added by one madd with ones, are
// taken off: the same exact block total as iq_block_sums gives from the
// levels, with one multiply per register instead of two and no sign work.
// digits(x, t) gives the eight registers of digits in the order of the
// column's values; decode (the levels, for decode_rows and the panels) is
// digits less 1.
template <class D> inline void tq_decode(const typename D::W & x, IDecoded & o) {
    D::digits(x, o.q);
    for (__m256i & q : o.q) q = _mm256_sub_epi8(q, _mm256_set1_epi8(1));
    for (__m256i & sc : o.sc) sc = _mm256_set1_epi16(1);
    o.d = D::factor * _cvtsh_ss(x.d);
}

struct TQ2Decoder {
    using W                       = block_tq2_0;
    static constexpr float factor = 1.0f;
    static constexpr bool  ternary = true;
    static void digits(const W & x, __m256i (&t)[8]) {
        // Values 128h + 32l + m: bits 2l of byte 32h + m.
        const __m256i m3 = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = iq_load(x.qs + 32 * h);
            for (int l = 0; l < 4; ++l) {
                t[4 * h + l] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3);
            }
        }
    }
    static void decode(const W & x, IDecoded & o) { tq_decode<TQ2Decoder>(x, o); }
};

// TQ1_0 keeps five base-3 digits in a byte b (b = ceil(256 v / 243) of
// their value v); digit n is floor(3 c / 256) of c = b 3^n mod 256, which
// moves it to the top. Here c comes from byte additions, which wrap modulo
// 256 (tq1_times3), and floor(3 c / 256) is (c > 85) + (c > 170), each
// compare an unsigned saturating subtraction clamped to 1.
inline __m256i tq1_times3(__m256i c) {
    return _mm256_add_epi8(c, _mm256_add_epi8(c, c));
}
inline __m128i tq1_times3(__m128i c) {
    return _mm_add_epi8(c, _mm_add_epi8(c, c));
}
inline __m256i tq1_digit(__m256i c) {
    const __m256i one = _mm256_set1_epi8(1);
    return _mm256_add_epi8(_mm256_min_epu8(_mm256_subs_epu8(c, _mm256_set1_epi8(85)), one),
                           _mm256_min_epu8(_mm256_subs_epu8(c, _mm256_set1_epi8(char(170))), one));
}

struct TQ1Decoder {
    using W                       = block_tq1_0;
    static constexpr float factor = 1.0f;
    static constexpr bool  ternary = true;
    static void digits(const W & x, __m256i (&t)[8]) {
        // Values 32n + m: digit n of qs[m] (n < 5); 160 + 16n + m: digit n
        // of qs[32 + m]; 240 + 4n + m: digit n of qh[m] (n < 4).
        __m256i c = iq_load(x.qs);
        for (int n = 0; n < 5; ++n) {
            t[n] = tq1_digit(c);
            c    = tq1_times3(c);
        }
        const __m128i m1  = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.qs + 32));
        const __m128i m3  = tq1_times3(m1);
        const __m128i m9  = tq1_times3(m3);
        const __m128i m27 = tq1_times3(m9);
        // qh's four bytes times 3^n in 32-bit lane n.
        const __m128i h1 = _mm_set1_epi32(int(iq_u32(x.qh)));
        const __m128i h3 = tq1_times3(h1), h9 = tq1_times3(h3), h27 = tq1_times3(h9);
        const __m128i h  = _mm_blend_epi32(_mm_blend_epi32(h1, h3, 0x2), _mm_blend_epi32(h9, h27, 0x8), 0xc);
        t[5]             = tq1_digit(_mm256_set_m128i(m3, m1));
        t[6]             = tq1_digit(_mm256_set_m128i(m27, m9));
        t[7]             = tq1_digit(_mm256_set_m128i(h, tq1_times3(m27)));
    }
    static void decode(const W & x, IDecoded & o) { tq_decode<TQ1Decoder>(x, o); }
};

// Whether D is a ternary type (Note [Ternary products]).
template <class D, class = void> struct iq_ternary : std::false_type {};
template <class D> struct iq_ternary<D, std::void_t<decltype(D::ternary)>> : std::bool_constant<D::ternary> {};

// A ternary block's lane sums with a column's block (Note [Ternary
// products]).
inline __m256i tq_block_sums(const __m256i (&t)[8], const block_q8_K & y) {
    __m256i p = _mm256_maddubs_epi16(t[0], iq_load(y.qs));
    for (int j = 1; j < 8; ++j) {
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(t[j], iq_load(y.qs + 32 * j)));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_sub_epi32(_mm256_madd_epi16(p, ones), _mm256_madd_epi16(iq_load(y.bsums), ones));
}

// Whether D's decoder takes an output of its own (the grid types with
// sign patterns, Note [Grid levels and signs apart], and IQ1_S and IQ1_M,
// Note [IQ1 levels unsigned]).
template <class D, class = void> struct iq_fused : std::false_type {};
template <class D>
struct iq_fused<D, std::void_t<decltype(D::decode(std::declval<const typename D::W &>(), std::declval<IFused<1> &>()))>>
    : std::true_type {};

// Note [Block totals]
// A row's product with a column: each super-block's exact integer total,
// then, eight blocks at a time, lane b of an f32 sum adds d * y.d times the
// total of block 8t + b (blocks past the last add 0 * 0), and the lanes are
// added in iq_hsum's order. Every kernel of these types computes exactly
// that, whatever its layout (the VNNI panels of avx512/iquant_panels.h too),
// so a column's results do not depend on the path the product takes; on
// the AVX-512 table IQ4_XS follows it too (avx512/iq4_xs.h).
// block(i, part, b) puts block i's lane sums with each column c in
// part[c][b] (eight int32 lanes whose sum is the block's exact total) and
// returns the weights' d.
// With scales (a callable, not nullptr), block's return is not used:
// scales(i0, live) gives the weights' d of blocks i0 .. i0 + 7 in lanes (0
// where live's lane is 0, past the row's last block), and the columns' d
// are gathered beside them (AVX2 gathers, on both tables),
// the same products y.d * d without eight scalar stores read back as one
// vector, which the processor cannot forward.
// Blocks i0 .. i0 + n - 1 (n <= 8) of a row into acc[c] (Note [Block
// totals]): block(i, part, b) gives block i's lane sums with each column in
// part[c][b] and returns the weights' d; with gathered scales (iq_row_totals)
// the d of the columns and of the weights are put in lanes apart.
template <int C, bool Gathered, class Block>
inline __attribute__((always_inline)) void iq_eight_blocks(int64_t i0, int64_t n, Block && block,
                                                          __m256i (&part)[C][8], float (&scale)[C][8],
                                                          const block_q8_K * const * bc) {
    for (int64_t b = 0; b < 8; ++b) {
        if (b >= n) {
            for (int c = 0; c < C; ++c) {
                part[c][b]  = _mm256_setzero_si256();
                scale[c][b] = 0.0f;
            }
            continue;
        }
        const float d = block(i0 + b, part, b);
        if constexpr (!Gathered) {
            for (int c = 0; c < C; ++c) {
                scale[c][b] = bc[c][i0 + b].d * d;
            }
        }
    }
}

template <int C, class Block, class Scales = std::nullptr_t>
void iq_row_totals(int64_t nb, const block_q8_K * const * bc, Block && block, float * dst, size_t ldd,
                   Scales && scales = nullptr) {
    constexpr bool gathered = !std::is_same_v<std::decay_t<Scales>, std::nullptr_t>;
    __m256         acc[C];
    for (int c = 0; c < C; ++c) {
        acc[c] = _mm256_setzero_ps();
    }
    // Eight blocks from i0, n of them in the row; called with n = 8 for
    // every whole group, so that the loop over them is unconditional and
    // the decoder's constants leave it.
    auto add8 = [&](int64_t i0, int64_t n) __attribute__((always_inline)) {
        __m256i           part[C][8];
        alignas(32) float scale[C][8];
        iq_eight_blocks<C, gathered>(i0, n, block, part, scale, bc);
        if constexpr (gathered) {
            const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i live  = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), lanes);
            const __m256  d8    = scales(i0, live);
            const __m256i y_at  = _mm256_mullo_epi32(lanes, _mm256_set1_epi32(int(sizeof(block_q8_K))));
            for (int c = 0; c < C; ++c) {
                const __m256 yd =
                    _mm256_mask_i32gather_ps(_mm256_setzero_ps(), &bc[c][i0].d, y_at, _mm256_castsi256_ps(live), 1);
                acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(yd, d8), _mm256_cvtepi32_ps(block_totals8(part[c])), acc[c]);
            }
        } else {
            for (int c = 0; c < C; ++c) {
                acc[c] = _mm256_fmadd_ps(_mm256_load_ps(scale[c]), _mm256_cvtepi32_ps(block_totals8(part[c])), acc[c]);
            }
        }
    };
    by_eight_blocks(nb, add8);
    for (int c = 0; c < C; ++c) {
        dst[size_t(c) * ldd] = iq_hsum(acc[c]);
    }
}

template <class D, int C>
void iq_gemv_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                  size_t ldd) {
    using W = typename D::W;
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    for (int64_t r = 0; r < nrows; ++r) {
        const auto * x = reinterpret_cast<const W *>(a + size_t(r) * lda);
        if constexpr (iq_ternary<D>::value) {
            iq_row_totals<C>(nb, bc, [&](int64_t i, __m256i (*part)[8], int64_t slot) {
                // Both cache lines a block (66 or 54 bytes) can take.
                const char * next = reinterpret_cast<const char *>(x + i) + lda;
                _mm_prefetch(next, _MM_HINT_T0);
                _mm_prefetch(next + sizeof(W) - 1, _MM_HINT_T0);
                __m256i t[8];
                D::digits(x[i], t);
                for (int c = 0; c < C; ++c) {
                    part[c][slot] = tq_block_sums(t, bc[c][i]);
                }
                return 0.0f;
            }, dst + r, ldd, [&](int64_t i0, __m256i live) {
                // The d of eight blocks: the 32-bit words ending with each
                // (d is a block's last field), high halves, packed to
                // eight words in order.
                static_assert(offsetof(W, d) + sizeof(uint16_t) == sizeof(W) && offsetof(W, d) >= 2);
                const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                      _mm256_set1_epi32(int(sizeof(W))));
                const auto *  p  = reinterpret_cast<const int *>(reinterpret_cast<const char *>(x + i0) + offsetof(W, d) - 2);
                const __m256i w  = _mm256_srli_epi32(_mm256_mask_i32gather_epi32(_mm256_setzero_si256(), p, at, live, 1), 16);
                const __m256i h  = _mm256_permute4x64_epi64(_mm256_packus_epi32(w, w), 0x08);
                return _mm256_mul_ps(_mm256_set1_ps(D::factor), _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
            });
        } else {
            static_assert(iq_fused<D>::value, "a grid decoder that takes the caller's output");
            iq_row_totals<C>(nb, bc, [&](int64_t i, __m256i (*part)[8], int64_t slot) {
                // The same place in the next row, which follows in memory.
                _mm_prefetch(reinterpret_cast<const char *>(x + i) + lda, _MM_HINT_T0);
                IFused<C> f{bc, i, {}, 0.0f};
                D::decode(x[i], f);
                for (int c = 0; c < C; ++c) {
                    part[c][slot] = f.isum[c];
                }
                return f.d;
            }, dst + r, ldd);
        }
    }
}

// Note [Rows decoded once]
// A decoded super-block as gemv_decoded reads it: the eight level
// registers, each level plus 64 (Note [Stored levels offset]), the scales
// of its 16 groups, and d.
struct StoredBlock {
    uint8_t u[QK_K];
    int16_t sc[16];
    float   d;
    char    pad[DECODED_BLOCK_BYTES - QK_K - 32 - sizeof(float)];
};
static_assert(sizeof(StoredBlock) == DECODED_BLOCK_BYTES);

template <class D>
void iq_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    stored_rows_fill<typename D::W, StoredBlock>(K, a, lda, nrows, out, [](const typename D::W & x, StoredBlock & o) {
        IDecoded w;
        D::decode(x, w);
        for (int j = 0; j < 8; ++j) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.u + 32 * j), _mm256_add_epi8(w.q[j], _mm256_set1_epi8(64)));
            o.sc[2 * j]     = int16_t(_mm256_extract_epi16(w.sc[j], 0));
            o.sc[2 * j + 1] = int16_t(_mm256_extract_epi16(w.sc[j], 8));
        }
        o.d = w.d;
    });
}

// Note [Stored levels offset]
// With many columns each stored level meets every column, and the sign
// trick costs two of the five instructions per register and column. The
// levels (|level| <= 62) plus 64 are unsigned bytes u <= 126, which meet
// the column's bytes through maddubs directly (|pair| <= 2 * 126 * 127,
// no saturation); the offset comes back off through the column's sums of
// 16: sum sc_g (u - 64) y = sum sc_g u y - 64 sum sc_g bsums_g, one madd
// with the 16 group scales per block and column. decode_rows stores u, once
// per row for all its column groups. The block's total is the same exact
// integer as iq_block_sums gives, so the bits are too.

// The stored rows' products (Note [Stored levels offset]) take the
// columns' blocks eight at a time for every row of the call before the next
// eight (stored_rows_walk, block_totals.h): those 8 x C blocks (up to 18 KiB)
// stay in the first-level cache across the rows, where a whole row's columns
// (C x nb blocks) came from the second level for every row. Each row's f32 sums follow Note [Block totals]
// as iq_row_totals does, in the same order, so the bits are the same.
template <int C>
void iq_gemv_decoded_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb,
                          float * dst, size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    stored_rows_walk<C>(nb, nrows, dst, ldd, [&](int64_t row, int64_t i0, int64_t n, float (*acc)[8])
                                                 __attribute__((always_inline)) {
        const auto *      x = reinterpret_cast<const StoredBlock *>(a + size_t(row) * lda);
        __m256i           part[C][8];
        alignas(32) float scale[C][8];
        iq_eight_blocks<C, false>(i0, n, [&](int64_t i, __m256i (*pt)[8], int64_t slot) {
            // One level register and its scales at a time, met by
            // every column: the columns' sums and these fit the 16
            // registers of AVX2.
            const StoredBlock & sb   = x[i];
            const __m256i       sc16 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.sc));
            const __m256i       lo8  = _mm256_permute4x64_epi64(sc16, 0x44); // lanes 0-7 in both halves
            const __m256i       hi8  = _mm256_permute4x64_epi64(sc16, 0xee); // lanes 8-15 in both halves
            __m256i             isum[C];
            for (int c = 0; c < C; ++c) {
                isum[c] = _mm256_setzero_si256();
            }
            for (int j = 0; j < 8; ++j) {
                const __m256i sc = group_scales16(lo8, hi8, j);
                const __m256i u  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.u + 32 * j));
                for (int c = 0; c < C; ++c) {
                    const __m256i p = _mm256_maddubs_epi16(u, iq_load(bc[c][i].qs + 32 * j));
                    isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(iq_load(bc[c][i].bsums), sc16), 6);
                pt[c][slot]          = _mm256_sub_epi32(isum[c], offset);
            }
            return sb.d;
        }, part, scale, bc);
        for (int c = 0; c < C; ++c) {
            const __m256 sum = _mm256_fmadd_ps(_mm256_load_ps(scale[c]),
                                               _mm256_cvtepi32_ps(block_totals8(part[c])),
                                               _mm256_load_ps(acc[c]));
            _mm256_store_ps(acc[c], sum);
        }
    }, iq_hsum);
}

template <class D>
void iq_gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
             float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) { iq_gemv_cols<D, decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd); });
}

// Each type: its enum name, its decoder (the including file undefines it).
#define LOOM_IQ_TYPES(X)                                                                                                 \
    X(IQ2_XXS, IQ2XXSDecoder)                                                                                 \
    X(IQ2_XS, IQ2XSDecoder)                                                                                    \
    X(IQ2_S, IQ2SDecoder)                                                                                       \
    X(IQ3_XXS, IQ3XXSDecoder)                                                                                 \
    X(IQ3_S, IQ3SDecoder)                                                                                       \
    X(IQ1_S, IQ1SDecoder)                                                                                       \
    X(IQ1_M, IQ1MDecoder)                                                                                       \
    X(TQ2_0, TQ2Decoder)                                                                                        \
    X(TQ1_0, TQ1Decoder)

void iq_gemv_decoded(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                     float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) { iq_gemv_decoded_cols<decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd); });
}

} // namespace

void add_iquant_kernels(KernelTable & t) {
#define LOOM_IQ_SET(E, D)                                                                                          \
    t.gemv_quant[GGML_TYPE_##E]   = iq_gemv<D>;                                                                        \
    t.decode_rows[GGML_TYPE_##E]  = iq_decode_rows<D>;                                                                 \
    t.gemv_decoded[GGML_TYPE_##E] = iq_gemv_decoded;
    LOOM_IQ_TYPES(LOOM_IQ_SET)
#undef LOOM_IQ_SET
}
