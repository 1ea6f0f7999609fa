// The eight-blocks step of Note [Block totals] (avx2/iquants_impl.h) and
// Note [K-quant block totals] (avx2/kquants_512.h), and the group scales of
// a decoded super-block, shared by both: the
// i-quant and K-quant impl files include this inside the ISA's namespace,
// under that ISA's target.
#pragma once

namespace {

// The totals of eight blocks' lane sums, block b's in lane b (exact int32
// additions).
inline __m256i block_totals8(const __m256i * v) {
    const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i lo = _mm256_hadd_epi32(h01, h23), hi = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// Eight registers of eight rows' sums added as kq_hsum and iq_hsum add a
// register's lanes (l and l + 4, those pairs two apart, the last two):
// each row's result in its lane.
inline __m256 rows8_add(const __m256 (&f)[8]) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(f[0], f[4]), _mm256_add_ps(f[2], f[6])),
                         _mm256_add_ps(_mm256_add_ps(f[1], f[5]), _mm256_add_ps(f[3], f[7])));
}

// The end of eight rows' products with a column, one row per lane: f[l]
// holds the f32 sum of the blocks i with i % 8 == l. The blocks that would
// follow the row's last in its group of eight add 0 * 0 (Adds times: once
// where a block adds one product, twice, the second subtracted, where it
// adds two as the K-quants with mins do), as the one-row kernels' lanes do;
// then the sums are added by rows8_add.
template <int Adds> inline __m256 rows8_finish(__m256 (&f)[8], int64_t nb) {
    static_assert(Adds == 1 || Adds == 2);
    for (int64_t l = nb % 8 == 0 ? 8 : nb % 8; l < 8; ++l) {
        f[l] = _mm256_fmadd_ps(_mm256_setzero_ps(), _mm256_setzero_ps(), f[l]);
        if constexpr (Adds == 2) {
            f[l] = _mm256_fnmadd_ps(_mm256_setzero_ps(), _mm256_setzero_ps(), f[l]);
        }
    }
    return rows8_add(f);
}

// The first n (1..8) lanes of s, eight rows' results, at out.
inline void rows8_store(__m256 s, float * out, int64_t n) {
    if (n >= 8) {
        _mm256_storeu_ps(out, s);
        return;
    }
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, s);
    std::memcpy(out, tmp, size_t(n) * sizeof(float));
}

// add8(i0, n) for the row's nb blocks eight at a time: n = 8 for every
// whole group (so that the loop inside add8 is unconditional there), then
// once for the rest.
template <class Add8> inline __attribute__((always_inline)) void by_eight_blocks(int64_t nb, Add8 && add8) {
    int64_t i0 = 0;
    for (; i0 + 8 <= nb; i0 += 8) {
        add8(i0, int64_t(8));
    }
    if (i0 < nb) {
        add8(i0, nb - i0);
    }
}

// The walk of decode_rows on the AVX2 table: nrows rows of K values of
// weight blocks W (lda bytes apart) into consecutive stored blocks S, one
// per super-block; store(x, o) decodes block x into o.
template <class W, class S, class Store>
inline void stored_rows_fill(int64_t K, const void * a, size_t lda, int64_t nrows, void * out, Store && store) {
    const int64_t nb = K / QK_K;
    auto *        o  = static_cast<S *>(out);
    for (int64_t r = 0; r < nrows; ++r) {
        const auto * x = reinterpret_cast<const W *>(static_cast<const char *>(a) + size_t(r) * lda);
        for (int64_t i = 0; i < nb; ++i, ++o) {
            store(x[i], *o);
        }
    }
}

// The walk of the AVX2 table's products of stored rows (Note [Rows decoded
// once]; the i-quants' and Q4_K/Q6_K's): rows in chunks of 64 whose f32
// sums (C columns x eight lanes) are kept while the columns' blocks go eight
// at a time for every row of the chunk, so that those 8 x C blocks stay in
// the first-level cache across the rows. add(row, i0, n, acc) adds blocks
// i0 .. i0 + n - 1 of a row into acc[c]; each sum ends as hsum of its lanes
// in dst (column c at dst + c * ldd). step(i0, n), where given, runs before
// the rows of each step (what the rows share of the columns' blocks).
template <int C, class Add, class Hsum, class Step = std::nullptr_t>
inline __attribute__((always_inline)) void stored_rows_walk(int64_t nb, int64_t nrows, float * dst, size_t ldd,
                                                            Add && add, Hsum && hsum, Step && step = nullptr) {
    constexpr int64_t k_rows = 64; // rows whose sums are kept at once
    alignas(32) float acc[k_rows][C][8];
    for (int64_t r0 = 0; r0 < nrows; r0 += k_rows) {
        const int64_t nr = std::min(k_rows, nrows - r0);
        for (int64_t r = 0; r < nr; ++r) {
            for (int c = 0; c < C; ++c) {
                _mm256_store_ps(acc[r][c], _mm256_setzero_ps());
            }
        }
        by_eight_blocks(nb, [&](int64_t i0, int64_t n) __attribute__((always_inline)) {
            if constexpr (!std::is_same_v<std::decay_t<Step>, std::nullptr_t>) {
                step(i0, n);
            }
            for (int64_t r = 0; r < nr; ++r) {
                add(r0 + r, i0, n, acc[r]);
            }
        });
        for (int64_t r = 0; r < nr; ++r) {
            for (int c = 0; c < C; ++c) {
                dst[size_t(c) * ldd + size_t(r0 + r)] = hsum(_mm256_load_ps(acc[r][c]));
            }
        }
    }
}

// Byte shuffles that give register j's group scales from 16 int16 scales:
// applied to lanes 0-7 (j < 4) or 8-15 (j >= 4) of the scales copied to
// both halves, lanes 0-7 take scale 2j, lanes 8-15 scale 2j + 1. Loaded
// from memory: built in the loop, the constants cost a dozen instructions
// each time.
struct GroupScalePick {
    alignas(32) int8_t pick[8][32];
};
constexpr GroupScalePick group_scale_pick_make() {
    GroupScalePick t{};
    for (int j = 0; j < 8; ++j) {
        for (int l = 0; l < 32; ++l) {
            const int lane = 2 * (j % 4) + (l < 16 ? 0 : 1); // within the half's eight
            t.pick[j][l]   = int8_t(2 * lane + (l % 2));
        }
    }
    return t;
}
inline constexpr GroupScalePick group_scale_pick = group_scale_pick_make();
// Register j's scales from lo8 (lanes 0-7 of the 16 scales in both halves)
// and hi8 (lanes 8-15).
inline __m256i group_scales16(__m256i lo8, __m256i hi8, int j) {
    return _mm256_shuffle_epi8(j < 4 ? lo8 : hi8,
                               _mm256_load_si256(reinterpret_cast<const __m256i *>(group_scale_pick.pick[j])));
}

} // namespace
