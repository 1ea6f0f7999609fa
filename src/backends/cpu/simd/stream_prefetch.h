#pragma once

// Note [Reading ahead of interleaved rows]
// The products of few columns with rows interleaved by eight (Q4_0 and
// Q8_0: Notes [Q4_0 rows by eight] and [Q8_0 rows by eight] in repack.h;
// IQ4_XS: Note [Interleaved IQ4_XS rows]) read each group of rows as one
// stream of bytes, from memory, and compute between their reads; the
// processor's own prefetchers then keep too few lines in flight for the
// memory's bandwidth. Each block's bytes are therefore asked for
// STREAM_AHEAD bytes before they are read (the same group's, or the next
// group's, which follows it; a prefetch never faults, so past the last
// group the requests cost only themselves). The distance, measured with
// loom-run's generation on a TinyLlama-shaped Q4_0 file (2 threads, the
// Zen 5 VM of bench/RESULTS.md, alternated): AVX2 table, 2048 bytes ahead
// 62.6-68.6 tokens/s, 6144 70.2-73.7, 8192 65.1-74.4, 16384 70.0-71.3;
// AVX-512 table, 2048 65.7-68.8, 6144 70.8-73.2. Included by files of every
// x86 instruction set: internal linkage, as tile_prefetch.h.

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

namespace loom::cpu {
namespace {

constexpr size_t STREAM_AHEAD = 6144;

// The lines of [p + STREAM_AHEAD, p + STREAM_AHEAD + bytes).
[[gnu::always_inline]] inline void prefetch_stream_ahead(const void * p, size_t bytes) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p) + STREAM_AHEAD;
    for (uintptr_t off = 0; off < bytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char *>(at + off), _MM_HINT_T0);
    }
}

} // namespace
} // namespace loom::cpu
