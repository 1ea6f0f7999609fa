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

} // namespace
