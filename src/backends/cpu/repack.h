#pragma once

// Weights in a layout of the CPU kernels' own: the "CPU_REPACK" buffer type.
//
// Note [Repacked weights]
// A matrix-vector product reads each weight once; how fast depends on how
// the reads run through memory. In ggml's layout a tile of eight rows is
// read as eight streams 1-8 KB apart, a new set every tile, and a block
// puts 2 bytes of scale before its weights, so a kernel gathers its
// registers from unaligned pieces. A buffer of the type CPU_REPACK stores
// matrices of the types its kernels read in layouts of their own, rows in
// groups of REPACK_ROWS: each group occupies the same bytes as its eight
// rows in ggml's layout (so views, offsets and sizes keep their meaning),
// the rows side by side, so that a register of weights holds the same
// values of several rows, one row in a lane, and a thread reads its rows
// as one run of whole, aligned cache lines:
//  - Q4_0 and Q8_0 on x86: Notes [Q4_0 rows by eight] and [Q8_0 rows by
//    eight] below (qgemm_q4_0_x8, qgemm_q8_0_x8, on the AVX2 and AVX-512
//    tables);
//  - Q4_0 and Q4_K on Arm: Notes [Interleaved Q4_0 rows] and [Interleaved
//    Q4_K rows] (gemv_repacked);
//  - IQ4_XS on the AVX2 and AVX-512 tables: Note [Interleaved IQ4_XS rows];
//  - F16 (K a multiple of 32) by chunks of 32 values, chunk j of group g at
//    g * 8 * row_size + 512 j, row r's 32 values at 64 r in it (Note
//    [Repacked F16] in avx512/gemv_float.cpp);
//  - Q4_K on the AVX2 table keeps every block where it is, its d, dmin and
//    scales too, and only the 128 bytes of qs change places: the four runs
//    of 32 transposed by 8-byte words (Note [Repacked Q4_K] in
//    simd/avx2/q4k_repacked.h).
// The results are the same bits as from ggml's layout.
//
// Only tensors the kernels can use are repacked (repackable()); others in
// such a buffer keep ggml's layout. The buffer converts on the way in and out,
// so ggml_backend_tensor_set and _get, memset and copies see ggml's layout at
// any offset. The CPU computes nothing but MUL_MAT with a repacked tensor as
// its weights (src[0]).

// Note [Interleaved Q4_0 rows]
// The Arm tables multiply four rows at once with SDOT's indexed form: one
// register holds four consecutive weights of each of four rows, and one
// instruction adds their products with the same four values of a column
// into the four rows' lanes, so no sum across lanes is left per block. A
// group of 8 rows is two sets of four (rows 4h .. 4h + 3 at h * 4 *
// row_size from the group's start, the same bytes their rows take in
// ggml's layout), a set block by block, block i at 72 i:
//
//     [0, 8)              the four rows' scales, row k's at 2 k
//     [8 + 16 j, +16)     bytes 4j .. 4j + 3 of qs of each row, row k's at 4 k
//                         (j = 0..3), each byte XORed with 0x88
//
// Byte b of qs holds weight b (low nibble) and weight b + 16 (high nibble);
// the XOR turns each nibble q into the 4-bit two's complement of q - 8, so
// that a shift left by 4 (low nibbles) or a mask of the high ones gives 16
// (q - 8) as signed bytes, two instructions per register. The block's
// integer sum comes out multiplied by 16, exactly, and the conversion to
// float divides it back in the same instruction (a fixed-point conversion
// with 4 fraction bits), which rounds as the conversion of the sum itself.
// The buffer XORs on the way in and out, so its reads, writes and fills
// see ggml's bytes.

// Note [Q4_0 rows by eight]
// The x86 tables read Q4_0 in a layout of their own: a group's eight rows
// side by side, four bytes of each row to a 32-byte word, so that one
// 256-bit register holds the same eight weights of each of the eight rows,
// one row a lane, and a column's
// products with them stay in their rows' lanes (Note [Q4_0 by eight on
// 256-bit registers] in simd/avx2/by_eight.cpp). A group occupies the
// bytes of its rows in ggml's layout, quad j (blocks 4j .. 4j + 3) at
// 576 j, every byte of the 32 blocks moved, none changed:
//
//     [0, 64)                   the scales, block 4j + q's eight at 16 q
//                               (row r's at 16 q + 2 r)
//     [64 + 128 q + 32 s, +32)  word w = s / 2 + 2 (s % 2) of block 4j + q
//                               (s = 0..3: words 0, 2, 1, 3): bytes
//                               4w .. 4w + 3 of each row's qs, row r's at 4 r
//
// Every quad starts on a cache line (576 = 9 * 64), and so do the eight
// scales of a block (one 16-byte load) and every word of qs. Words 0 and 1
// hold values 0-7 and 16-23 of each row, words 2 and 3 the rest; a
// 512-bit register of the AVX-512 table (simd/avx512/by_eight.cpp)
// loads words 0 and 2 or 1 and 3, each the two halves of a line.

// Note [Q8_0 rows by eight]
// The x86 tables read Q8_0 in the same way (simd/avx512/by_eight.cpp,
// simd/avx2/by_eight.cpp, which turns the bytes back to signed):
// a group of eight rows occupies the bytes of its rows in ggml's layout,
// quad j (blocks 4j .. 4j + 3) at 1088 j, each byte of qs stored XORed with
// 0x80 (the value plus 128, unsigned, as vpdpbusd takes it):
//
//     [0, 64)                   the scales, block 4j + q's eight at 16 q
//                               (row r's at 16 q + 2 r)
//     [64 + 256 q + 32 s, +32)  word w = 4 (s / 4) + (s % 4) / 2 + 2 (s % 2)
//                               of block 4j + q (s = 0..7: words 0, 2, 1, 3,
//                               4, 6, 5, 7): bytes 4w .. 4w + 3 of each row's
//                               qs, row r's at 4 r
//
// so that each line of a block holds words 0 and 2, 1 and 3, 4 and 6, or
// 5 and 7 of the eight rows. The buffer XORs on the way in and out.

// Note [Interleaved Q4_K rows]
// The same tables multiply Q4_K four rows at once in the same way. A group
// of 8 rows is two sets of four (rows 4h .. 4h + 3 at h * 4 * row_size from
// the group's start), a set block by block, block i at 576 i (the bytes of
// the four rows' block i), every byte of the four blocks moved, none
// changed:
//
//     [0, 8)                     the four rows' d, row k's at 2 k
//     [8, 16)                    their dmin, likewise
//     [16 + 16 c, +16)           byte 4 c + g of each row's 12 bytes of
//                                scales (c = 0..2, g = 0..3), row k's at 4 g + k
//     [64 + 128 j + 16 t, +16)   bytes 32 j + 4 t .. + 3 of each row's qs,
//                                row k's at 4 k (j = 0..3, t = 0..7)
//
// Run j of qs (32 bytes) holds groups 2j (low nibbles) and 2j + 1 (high
// nibbles) of 32 values each: a register of 16 bytes is four values of
// group 2j and four of group 2j + 1 of each of four rows, met by SDOT's
// indexed form with four values of the column, so that a group's products
// land in its rows' lanes and meet the four rows' scales in one
// multiply-add. The scale bytes lie in the same lanes, so the 64 six-bit
// scales and mins of four rows decode at once (seven vector instructions:
// bytes 0-3 hold scales 0-3 and the top bits of scales 4-7, bytes 4-7 mins
// 0-3 and the top bits of mins 4-7, bytes 8-11 the low bits of scales 4-7
// and mins 4-7). Per block of a set and column: 64 SDOT, 8 multiply-adds
// with the scales, 8 with the mins against the column's sums of 32, and the
// block scales in float for the four rows at once. Each row's integer
// totals are those of ggml's layout and meet the block scales in the same
// order: the same bits as gemv_q4_K on ggml's layout. The neon_i8mm table
// reads the same layout: 8-byte runs of pairs of rows for SMMLA were weighed
// and cost the one-column product more than they saved with several columns
// (bench/RESULTS.md, "SMMLA for repacked Q4_K").

// Note [Interleaved IQ4_XS rows]
// A one-column product of IQ4_XS in ggml's layout decodes each row's
// block alone and sums its products across the lanes of a register, once
// per row. Interleaved, a register of weights holds the same four bytes
// of qs of each of eight rows: a column's four matching bytes, broadcast,
// meet them in one vpdpbusd (or maddubs) with one row's sum a 32-bit
// lane, and the eight rows' block totals come out in the eight lanes of
// one register, with nothing summed across lanes. A group of 8 rows
// occupies the bytes of its rows in ggml's layout (so views, offsets and
// sizes keep their meaning), block i of the group at 8 * 136 i (the bytes
// of the rows' block i), every byte of the eight blocks moved, none
// changed:
//
//     [0, 16)               the eight rows' d, row r's at 2 r
//     [16, 32)              their scales_h, row r's at 16 + 2 r
//     [32, 64)              their scales_l, row r's four bytes at 32 + 4 r
//     [64 + 32 w, +32)      bytes 4 w .. 4 w + 3 of each row's qs, row r's
//                           at 4 r (w = 0..31)
//
// Word w of qs is bytes 4 (w % 4) .. + 3 of group w / 4 (32 values): its
// low nibbles are values 32 (w / 4) + 4 (w % 4) .. + 3, its high nibbles
// the same + 16. A 256-bit register is one word of the eight rows (the
// AVX2 table: simd/avx2/iq4_xs_interleaved.h), a 512-bit one two words
// (the AVX-512 table: simd/avx512/iq4_xs_interleaved.h); every block
// starts on a cache line (1088 = 17 * 64), and so does every load of qs.
// The d and the scales of the eight rows are one load each, decoded for
// the eight rows at once. Each table's kernel gives the bits of its gemv_quant entry on
// ggml's layout (the integer sums are exact, and meet the float scales in
// the same order), and its decode_rows_repacked the rows decode_rows
// writes. Rows come in whole groups (repackable()).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "ggml-backend.h"
#include "ggml.h"

namespace loom::cpu {

constexpr int64_t REPACK_ROWS = 8;
constexpr int64_t REPACK_QUAD = 4; // blocks per quad
constexpr int64_t REPACK_F16_CHUNK = 32; // F16 values of a row side by side

// Byte offset, from its group's start, of chunk j (values [32 j, 32 j + 32))
// of row r (0..7) of a group of repacked F16 rows.
constexpr size_t repacked_f16_chunk(size_t r, size_t j) {
    return size_t(REPACK_ROWS * REPACK_F16_CHUNK) * 2 * j + size_t(REPACK_F16_CHUNK) * 2 * r;
}

// The 32-byte slot, within a block's words, of word w of Q4_0 (w < 4) or
// Q8_0 (w < 8) rows by eight (Notes [Q4_0 rows by eight] and [Q8_0 rows by
// eight]): within each four, words 0, 2, 1, 3, so that a 64-byte line holds
// words 0 and 2 or 1 and 3 (4 and 6, 5 and 7).
constexpr size_t by_eight_slot(size_t w) {
    return 4 * (w / 4) + 2 * (w % 2) + w % 4 / 2;
}

constexpr size_t IQ4_XS_BLOCK_BYTES = 136; // sizeof(block_iq4_xs)

// Offset, from the start of block i of a group of interleaved IQ4_XS rows
// (Note [Interleaved IQ4_XS rows]), of byte b (0..135) of row r's (0..7)
// block in ggml's layout, and how many bytes from b on lie together there.
struct Iq4xsPlace {
    size_t at;
    size_t run;
};
constexpr Iq4xsPlace iq4_xs_interleaved_place(size_t r, size_t b) {
    if (b < 2) return {2 * r + b, 2 - b};               // d
    if (b < 4) return {16 + 2 * r + (b - 2), 4 - b};    // scales_h
    if (b < 8) return {32 + 4 * r + (b - 4), 8 - b};    // scales_l
    const size_t q = b - 8;                             // byte of qs
    return {64 + 32 * (q / 4) + 4 * r + q % 4, 4 - q % 4};
}

// The eight rows' blocks of block `set` of a group of interleaved IQ4_XS
// rows, in ggml's layout (row r's 136 bytes at out + 136 r).
inline void iq4_xs_interleaved_unpack8(const uint8_t * set, uint8_t * out) {
    for (size_t r = 0; r < 8; ++r) {
        uint8_t * o = out + IQ4_XS_BLOCK_BYTES * r;
        std::memcpy(o, set + 2 * r, 2);
        std::memcpy(o + 2, set + 16 + 2 * r, 2);
        std::memcpy(o + 4, set + 32 + 4 * r, 4);
        for (size_t w = 0; w < 32; ++w) {
            std::memcpy(o + 8 + 4 * w, set + 64 + 32 * w + 4 * r, 4);
        }
    }
}

// Whether t's type and shape have a repacked layout and the kernels this
// processor runs can use it: Q4_0 or Q8_0 with whole quads per row (ne0 %
// 128 == 0), F16 with ne0 % 32 == 0, Q4_K or IQ4_XS; rows in whole groups
// (ne1 % 8 == 0), contiguous.
bool repackable(const ggml_tensor * t);

// The types repackable() takes on this processor's kernel table, by
// ggml_type_name, comma-separated ("" for none).
std::string repacked_type_names();

// Whether t's data is in the repacked layout (t lives in a CPU_REPACK buffer
// that repacked it). Views of such a tensor are not; see repacked_base().
bool is_repacked(const ggml_tensor * t);

// The repacked tensor whose bytes t's data lies in (t itself, or the tensor
// a view of t was made of), or nullptr.
const ggml_tensor * repacked_base(const ggml_tensor * t);

// ggml's layout at byte offset `offset` of t (is_repacked) to and from the
// repacked layout; any range inside ggml_nbytes(t).
void repack_write(const ggml_tensor * t, const void * src, size_t offset, size_t n);
void repack_read(const ggml_tensor * t, void * dst, size_t offset, size_t n);
void repack_fill(const ggml_tensor * t, uint8_t value, size_t offset, size_t n);

// Row r of t (is_repacked) in ggml's layout, into out (row size bytes).
void repack_unpack_row(const ggml_tensor * t, int64_t r, void * out);

// The CPU_REPACK buffer type (one, of the CPU device), and whether b is of it.
ggml_backend_buffer_type_t repack_buffer_type();
bool                       is_repack_buffer(ggml_backend_buffer_t b);
// Whether the CPU reads b's tensors in place: host memory or CPU_REPACK.
bool cpu_reads_buffer(ggml_backend_buffer_t b);

// Memory for a CPU buffer of size bytes (std::free releases it): 64-byte
// aligned, and from 2 MiB on in 2 MiB pages where the system gives them.
// nullptr when size is 0 or the memory cannot be had.
void * host_alloc(size_t size);

// Creates the buffer type for the CPU device dev (done once, by the device).
std::unique_ptr<ggml_backend_buffer_type> make_repack_buffer_type(ggml_backend_device * dev);

} // namespace loom::cpu
