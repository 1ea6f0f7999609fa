// Loads shared by the VNNI panel kernels (Note [Decoded panels] in
// avx512/iquant_panels.h, Note [K-quant panels] in avx512/kquant_panels.h).
// Included inside namespace loom::cpu::avx512 under the AVX-512 target.

namespace {

inline __m512i panel_load(const void * p) {
    return _mm512_loadu_si512(p);
}

// The zero-masking forms below with every lane set compile to the plain
// instructions; the plain intrinsics pass GCC an undefined source that
// -Wmaybe-uninitialized reports.
constexpr __mmask16 k_panel_all = 0xffff;

// Four bytes at p in every int32 lane.
inline __m512i panel_bcast4(const void * p) {
    return _mm512_maskz_broadcastd_epi32(k_panel_all, _mm_loadu_si32(p));
}

// The end of a panel's products with one column: f[l] holds, for each of
// the panel's 16 rows, the f32 sum of the blocks i with i % 8 == l. The
// blocks that would follow the row's last in its group of eight add 0 * 0
// (Adds times: once where each block adds one product, twice, the second
// subtracted, where it adds two as the K-quants with mins do), as the
// matrix-vector kernels' lanes do; then the lanes are added in kq_hsum's
// and iq_hsum's order (l and l + 4, those pairs two apart, the last two)
// and the first left rows (all 16 from 16 on) stored at dst.
template <int Adds>
inline void panel_finish(__m512 (&f)[8], int64_t nb, float * dst, int64_t left) {
    static_assert(Adds == 1 || Adds == 2);
    for (int64_t l = nb % 8 == 0 ? 8 : nb % 8; l < 8; ++l) {
        f[l] = _mm512_fmadd_ps(_mm512_setzero_ps(), _mm512_setzero_ps(), f[l]);
        if constexpr (Adds == 2) {
            f[l] = _mm512_fnmadd_ps(_mm512_setzero_ps(), _mm512_setzero_ps(), f[l]);
        }
    }
    const __m512    s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(f[0], f[4]), _mm512_add_ps(f[2], f[6])),
                                      _mm512_add_ps(_mm512_add_ps(f[1], f[5]), _mm512_add_ps(f[3], f[7])));
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    _mm512_mask_storeu_ps(dst, m, s);
}

} // namespace
