// The repacked layouts of Q4_0, Q8_0, F16, Q4_K and IQ4_XS weights (Note [Repacked weights]
// in repack.h lists them) and the CPU_REPACK buffers that hold them.

#include "repack.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "core/types.h"
#include "simd/kernel_table.h"

namespace loom::cpu {

namespace {

constexpr size_t k_scale     = sizeof(ggml_fp16_t);
constexpr size_t k_alignment = 64;

// Marks a tensor whose data the buffer repacked (ggml_tensor::extra).
const char k_repacked_tag = 0;

// Where byte `o` of a group (offset from the group's start in ggml's layout)
// lies in the repacked group, how many bytes from there on are contiguous
// in both layouts (to the end of the scale or of the weights), and what
// they are XORed with there.
struct Place {
    size_t  at;
    size_t  run;
    uint8_t flip = 0;
};

// Whether the kernel table in use reads Q4_0 as Note [Interleaved Q4_0
// rows] lays it out (the Arm tables) rather than by eight (x86).
bool q4_0_interleaved() {
    return best_kernels().gemv_repacked[GGML_TYPE_Q4_0] != nullptr;
}

// Note [Interleaved Q4_0 rows]: set h = r / 4 of the group, block i at 72 i.
Place place_q4_0_interleaved(size_t row_size, size_t o) {
    constexpr size_t block = sizeof(block_q4_0);
    const size_t     r     = o / row_size;
    const size_t     i     = o % row_size / block;
    const size_t     b     = o % row_size % block;
    const size_t     at    = 4 * row_size * (r / 4) + 4 * block * i;
    if (b < k_scale) {
        return {at + 2 * (r % 4) + b, k_scale - b};
    }
    const size_t k = b - k_scale; // byte of qs, 0..15
    return {at + 8 + 16 * (k / 4) + 4 * (r % 4) + k % 4, 4 - k % 4, 0x88};
}

// Note [Q4_0 rows by eight]: quad i / 4 of the group at 576 (i / 4).
Place place_q4_0_by_eight(size_t row_size, size_t o) {
    constexpr size_t block = sizeof(block_q4_0);
    const size_t     r     = o / row_size;
    const size_t     i     = o % row_size / block;
    const size_t     b     = o % row_size % block;
    const size_t     q     = i % REPACK_QUAD;
    const size_t     at    = size_t(REPACK_ROWS * REPACK_QUAD) * block * (i / REPACK_QUAD);
    if (b < k_scale) {
        return {at + 16 * q + 2 * r + b, k_scale - b};
    }
    const size_t k = b - k_scale; // byte of qs, 0..15
    return {at + 64 + 128 * q + 32 * by_eight_slot(k / 4) + 4 * r + k % 4, 4 - k % 4};
}

// Whether the kernel table in use reads Q4_K as Note [Interleaved Q4_K
// rows] lays it out (the Arm tables) rather than by words (Note [Repacked
// Q4_K]).
bool q4_K_interleaved() {
    return best_kernels().q4_K_rows_interleaved;
}

// Note [Interleaved Q4_K rows]: set h = r / 4 of the group, block i at 576 i.
Place place_q4_K_interleaved(size_t row_size, size_t o) {
    constexpr size_t block  = sizeof(block_q4_K);
    constexpr size_t scales = offsetof(block_q4_K, scales);
    constexpr size_t qs     = offsetof(block_q4_K, qs);
    const size_t     r      = o / row_size;
    const size_t     k      = r % 4;
    const size_t     b      = o % row_size % block;
    const size_t     at     = 4 * row_size * (r / 4) + 4 * block * (o % row_size / block);
    if (b < scales) { // d (bytes 0, 1) or dmin (2, 3)
        return {at + 8 * (b / 2) + 2 * k + b % 2, 2 - b % 2};
    }
    if (b < qs) {
        const size_t c = b - scales; // byte of scales, 0..11
        return {at + 16 + 16 * (c / 4) + 4 * (c % 4) + k, 1};
    }
    const size_t q = b - qs; // byte of qs, 0..127
    return {at + 64 + 128 * (q / 32) + 16 * (q % 32 / 4) + 4 * k + q % 4, 4 - q % 4};
}

// Note [Interleaved IQ4_XS rows]: block i of the group at 8 * 136 i.
Place place_iq4_xs(size_t row_size, size_t o) {
    const size_t     r = o / row_size;
    const size_t     i = o % row_size / IQ4_XS_BLOCK_BYTES;
    const Iq4xsPlace p = iq4_xs_interleaved_place(r, o % row_size % IQ4_XS_BLOCK_BYTES);
    return {size_t(REPACK_ROWS) * IQ4_XS_BLOCK_BYTES * i + p.at, p.run};
}

Place place(ggml_type type, size_t row_size, size_t o, bool interleaved) {
    if (type == GGML_TYPE_IQ4_XS) {
        return place_iq4_xs(row_size, o);
    }
    if (type == GGML_TYPE_F16) {
        const size_t chunk = REPACK_F16_CHUNK * sizeof(ggml_fp16_t);
        const size_t b     = o % chunk;
        return {repacked_f16_chunk(o / row_size, o % row_size / chunk) + b, chunk - b};
    }
    const size_t block = ggml_type_size(type); // 18, 34 or 144
    const size_t r     = o / row_size;
    if (type == GGML_TYPE_Q4_K) {
        if (interleaved) {
            return place_q4_K_interleaved(row_size, o);
        }
        // Note [Repacked Q4_K]: each block in place, qs's four runs of 32
        // bytes transposed by 8-byte words.
        const size_t at = o - o % row_size % block; // the block's start
        const size_t b  = o % row_size % block;
        const size_t qs = offsetof(block_q4_K, qs);
        if (b < qs) {
            return {at + b, qs - b};
        }
        const size_t k = b - qs;
        return {at + qs + 32 * (k % 32 / 8) + 8 * (k / 32) + k % 8, 8 - k % 8};
    }
    if (type == GGML_TYPE_Q4_0) {
        return interleaved ? place_q4_0_interleaved(row_size, o) : place_q4_0_by_eight(row_size, o);
    }
    const size_t i     = o % row_size / block; // block in the row
    const size_t b     = o % row_size % block; // byte in the block
    const size_t q     = i % REPACK_QUAD;
    const size_t qa    = i / REPACK_QUAD * (size_t(REPACK_ROWS * REPACK_QUAD) * block);
    // Q8_0: Note [Q8_0 rows by eight].
    if (b < k_scale) {
        return {qa + 16 * q + 2 * r + b, k_scale - b};
    }
    const size_t k = b - k_scale; // weight 0..31
    return {qa + 64 + 256 * q + 32 * by_eight_slot(k / 4) + 4 * r + k % 4, 4 - k % 4, 0x80};
}

// fn(repacked offset, ggml-layout offset, bytes, XOR) over the pieces of
// [offset, offset + n) of t, both offsets from the tensor's start.
template <class F> void for_each_piece(const ggml_tensor * t, size_t offset, size_t n, F && fn) {
    const size_t row_size    = t->nb[1];
    const size_t group       = size_t(REPACK_ROWS) * row_size;
    const bool   interleaved = (t->type == GGML_TYPE_Q4_0 && q4_0_interleaved()) ||
                             (t->type == GGML_TYPE_Q4_K && q4_K_interleaved());
    size_t       pos         = offset;
    const size_t end         = offset + n;
    while (pos < end) {
        const size_t g0  = pos / group * group;
        const Place  p   = place(t->type, row_size, pos - g0, interleaved);
        const size_t len = std::min(p.run, end - pos);
        fn(g0 + p.at, pos, len, p.flip);
        pos += len;
    }
}

// memcpy, each byte XORed with flip.
void copy_flipped(char * dst, const char * src, size_t n, uint8_t flip) {
    if (flip == 0) {
        std::memcpy(dst, src, n);
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        dst[i] = char(uint8_t(src[i]) ^ flip);
    }
}

void check_range(const ggml_tensor * t, size_t offset, size_t n) {
    LOOM_REQUIRE(offset <= ggml_nbytes(t) && n <= ggml_nbytes(t) - offset,
                 "bytes [%zu, %zu + %zu) lie outside tensor %s (%zu bytes)", offset, offset, n, t->name,
                 ggml_nbytes(t));
}

// The tensor whose repacked bytes t's data lies in, with t's offset there.
struct Target {
    const ggml_tensor * base;
    size_t              offset;
};

Target target_of(const ggml_tensor * t) {
    const ggml_tensor * base = repacked_base(t);
    if (base == nullptr) {
        return {nullptr, 0};
    }
    return {base, size_t(static_cast<const char *>(t->data) - static_cast<const char *>(base->data))};
}

// Bytes [offset, offset + n) of t: converted by repacked(base, offset in
// base) when they lie in a repacked tensor, else copied as they are (plain()).
template <class Repacked, class Plain>
void route(const ggml_tensor * t, size_t offset, size_t n, Repacked && repacked, Plain && plain) {
    const Target tg = target_of(t);
    if (tg.base == nullptr) {
        plain();
        return;
    }
    check_range(t, offset, n);
    repacked(tg.base, tg.offset + offset);
}

class RepackBuffer final : public HostBuffer {
  public:
    RepackBuffer(ggml_backend_buffer_type * type, void * data, size_t size) : HostBuffer(type, data, size) {}
    ~RepackBuffer() override { std::free(data_); }

    ggml_status init_tensor(ggml_tensor * t) override {
        if (t->view_src == nullptr && repackable(t)) {
            t->extra = const_cast<char *>(&k_repacked_tag);
        }
        return GGML_STATUS_SUCCESS;
    }
    void set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override {
        route(t, offset, n, [&](const ggml_tensor * base, size_t at) { repack_write(base, data, at, n); },
              [&] { HostBuffer::set_tensor(t, data, offset, n); });
    }
    void get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override {
        route(t, offset, n, [&](const ggml_tensor * base, size_t at) { repack_read(base, data, at, n); },
              [&] { HostBuffer::get_tensor(t, data, offset, n); });
    }
    void memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override {
        route(t, offset, n, [&](const ggml_tensor * base, size_t at) { repack_fill(base, value, at, n); },
              [&] { HostBuffer::memset_tensor(t, value, offset, n); });
    }
    // Copies go through get_tensor and set_tensor, which convert.
    bool cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override {
        (void) src;
        (void) dst;
        return false;
    }
};

// The buffer type; the CPU device owns the one instance (cpu_backend.cpp).
class RepackBufferType final : public ggml_backend_buffer_type {
  public:
    explicit RepackBufferType(ggml_backend_device * dev) : ggml_backend_buffer_type(dev) {}

    const char * name() const override { return "CPU_REPACK"; }
    size_t       alignment() const override { return k_alignment; }
    // Not host memory: a repacked tensor's bytes are not ggml's layout.
    bool is_host() const override { return false; }
    // init_tensor marks the tensors that are repacked.
    bool needs_init_tensor() const override { return true; }

    ggml_backend_buffer * alloc_buffer(size_t size) override {
        void * data = host_alloc(size); // weights: 2 MiB pages, as the CPU's own buffers
        if (size > 0 && data == nullptr) {
            LOOM_LOG_ERROR("CPU_REPACK: failed to allocate a buffer of %zu bytes\n", size);
            return nullptr;
        }
        auto * buf = new (std::nothrow) RepackBuffer(this, data, size);
        if (buf == nullptr) {
            std::free(data);
        }
        return buf;
    }
};

} // namespace

std::unique_ptr<ggml_backend_buffer_type> make_repack_buffer_type(ggml_backend_device * dev) {
    return std::make_unique<RepackBufferType>(dev);
}

namespace {

// The types with a repacked layout, and whether the kernel table in use
// reads it: the one place that says which types the buffer repacks.
constexpr ggml_type k_layout_types[] = {GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
                                        GGML_TYPE_IQ4_XS};

bool has_kernels(ggml_type type) {
    const KernelTable & kt = best_kernels();
    switch (type) {
        case GGML_TYPE_F16: return kt.gemv_f16_x8 != nullptr;
        case GGML_TYPE_Q4_0: return kt.qgemm_q4_0_x8.gemm != nullptr || kt.gemv_repacked[type] != nullptr;
        case GGML_TYPE_Q8_0: return kt.qgemm_q8_0_x8.gemm != nullptr;
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_IQ4_XS:
            // Rows decoded once (the AVX2 table; IQ4_XS on AVX-512 too)
            // must be decoded from the repacked layout too.
            return kt.gemv_repacked[type] != nullptr &&
                   (kt.gemv_decoded[type] == nullptr || kt.decode_rows_repacked[type] != nullptr);
        case GGML_TYPE_F32: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_1:
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K:
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_I8:
        case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M:
        case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4:
        case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT: return false;
    }
    return false;
}

} // namespace

bool repackable(const ggml_tensor * t) {
    if (t == nullptr || !has_kernels(t->type) || t->ne[1] % REPACK_ROWS != 0 || !ggml_is_contiguous(t)) {
        return false;
    }
    switch (t->type) {
        case GGML_TYPE_F16: return t->ne[0] % REPACK_F16_CHUNK == 0;
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_IQ4_XS: return t->ne[0] % QK_K == 0;
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q8_0: return t->ne[0] % (ggml_blck_size(t->type) * REPACK_QUAD) == 0; // whole quads
        case GGML_TYPE_F32: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            return false; // no kernels (has_kernels)
    }
    return false;
}

std::string repacked_type_names() {
    std::string out;
    for (ggml_type type : k_layout_types) {
        if (has_kernels(type)) {
            if (!out.empty()) {
                out.push_back(',');
            }
            out.append(ggml_type_name(type));
        }
    }
    return out;
}

bool is_repack_buffer(ggml_backend_buffer_t b) {
    return b != nullptr && b->buft == repack_buffer_type();
}

bool cpu_reads_buffer(ggml_backend_buffer_t b) {
    return b != nullptr && (b->buft->is_host() || is_repack_buffer(b));
}

bool is_repacked(const ggml_tensor * t) {
    return t != nullptr && t->extra == &k_repacked_tag && is_repack_buffer(t->buffer);
}

const ggml_tensor * repacked_base(const ggml_tensor * t) {
    if (t == nullptr) {
        return nullptr;
    }
    if (is_repacked(t)) {
        return t;
    }
    return t->view_src != nullptr && is_repacked(t->view_src) ? t->view_src : nullptr;
}

namespace {

// A Q4_K block from one layout to the other (Note [Repacked Q4_K]: the same
// block with qs's words transposed, its own inverse), whole.
void q4k_convert_block(const char * in, char * out) {
    constexpr size_t qs = offsetof(block_q4_K, qs);
    std::memcpy(out, in, qs);
    for (size_t j = 0; j < 4; ++j) {
        for (size_t k = 0; k < 4; ++k) {
            std::memcpy(out + qs + 32 * k + 8 * j, in + qs + 32 * j + 8 * k, 8);
        }
    }
}

// fn(ggml-layout offset, repacked offset, bytes) over the pieces of a group
// of 8 Q4_K rows in Note [Interleaved Q4_K rows], offsets from the group's
// start: the pieces place_q4_K_interleaved finds, without looking each up.
template <class F> void q4k_interleaved_group_pieces(size_t row_size, F && fn) {
    constexpr size_t block = sizeof(block_q4_K);
    constexpr size_t sc    = offsetof(block_q4_K, scales);
    constexpr size_t qs    = offsetof(block_q4_K, qs);
    for (size_t r = 0; r < size_t(REPACK_ROWS); ++r) {
        const size_t k = r % 4;
        for (size_t i = 0; i < row_size / block; ++i) {
            const size_t from = r * row_size + i * block;
            const size_t set  = 4 * row_size * (r / 4) + 4 * block * i;
            fn(from, set + 2 * k, 2);
            fn(from + 2, set + 8 + 2 * k, 2);
            for (size_t c = 0; c < 12; ++c) {
                fn(from + sc + c, set + 16 + 16 * (c / 4) + 4 * (c % 4) + k, 1);
            }
            for (size_t q = 0; q < 128; q += 4) {
                fn(from + qs + q, set + 64 + 128 * (q / 32) + 16 * (q % 32 / 4) + 4 * k, 4);
            }
        }
    }
}

// The same for a group of 8 IQ4_XS rows in Note [Interleaved IQ4_XS rows].
template <class F> void iq4_xs_interleaved_group_pieces(size_t row_size, F && fn) {
    constexpr size_t block = IQ4_XS_BLOCK_BYTES;
    for (size_t r = 0; r < size_t(REPACK_ROWS); ++r) {
        for (size_t i = 0; i < row_size / block; ++i) {
            const size_t from = r * row_size + i * block;
            const size_t set  = size_t(REPACK_ROWS) * block * i;
            for (size_t b = 0; b < block;) {
                const Iq4xsPlace p = iq4_xs_interleaved_place(r, b);
                fn(from + b, set + p.at, p.run);
                b += p.run;
            }
        }
    }
}

// pieces(pos, len) over the parts of [offset, offset + n) outside whole
// blocks of `block` bytes (from the tensor's start), whole(pos) for each
// whole block: a Q4_K block stays where it is, so whole ones are converted
// at once instead of by pieces of up to 8 bytes.
template <class Pieces, class Whole>
void by_whole_blocks(size_t offset, size_t n, size_t block, Pieces && pieces, Whole && whole) {
    const size_t end   = offset + n;
    size_t       pos   = offset;
    const size_t first = std::min(end, (pos + block - 1) / block * block);
    if (first > pos) {
        pieces(pos, first - pos);
        pos = first;
    }
    for (; pos + block <= end; pos += block) {
        whole(pos);
    }
    if (pos < end) {
        pieces(pos, end - pos);
    }
}

} // namespace

void repack_write(const ggml_tensor * t, const void * src, size_t offset, size_t n) {
    auto *       base = static_cast<char *>(t->data);
    const auto * in   = static_cast<const char *>(src);
    auto pieces = [&](size_t from, size_t len) {
        for_each_piece(t, from, len, [&](size_t at, size_t pos, size_t run, uint8_t flip) {
            copy_flipped(base + at, in + (pos - offset), run, flip);
        });
    };
    if (t->type == GGML_TYPE_IQ4_XS) {
        by_whole_blocks(offset, n, size_t(REPACK_ROWS) * t->nb[1], pieces, [&](size_t pos) {
            iq4_xs_interleaved_group_pieces(t->nb[1], [&](size_t plain, size_t packed, size_t len) {
                std::memcpy(base + pos + packed, in + (pos - offset) + plain, len);
            });
        });
        return;
    }
    if (t->type != GGML_TYPE_Q4_K) {
        pieces(offset, n);
        return;
    }
    if (q4_K_interleaved()) {
        by_whole_blocks(offset, n, size_t(REPACK_ROWS) * t->nb[1], pieces, [&](size_t pos) {
            q4k_interleaved_group_pieces(t->nb[1], [&](size_t plain, size_t packed, size_t len) {
                std::memcpy(base + pos + packed, in + (pos - offset) + plain, len);
            });
        });
        return;
    }
    by_whole_blocks(offset, n, sizeof(block_q4_K), pieces,
                    [&](size_t pos) { q4k_convert_block(in + (pos - offset), base + pos); });
}

void repack_read(const ggml_tensor * t, void * dst, size_t offset, size_t n) {
    const auto * base = static_cast<const char *>(t->data);
    auto *       out  = static_cast<char *>(dst);
    auto pieces = [&](size_t from, size_t len) {
        for_each_piece(t, from, len, [&](size_t at, size_t pos, size_t run, uint8_t flip) {
            copy_flipped(out + (pos - offset), base + at, run, flip);
        });
    };
    if (t->type == GGML_TYPE_IQ4_XS) {
        by_whole_blocks(offset, n, size_t(REPACK_ROWS) * t->nb[1], pieces, [&](size_t pos) {
            iq4_xs_interleaved_group_pieces(t->nb[1], [&](size_t plain, size_t packed, size_t len) {
                std::memcpy(out + (pos - offset) + plain, base + pos + packed, len);
            });
        });
        return;
    }
    if (t->type != GGML_TYPE_Q4_K) {
        pieces(offset, n);
        return;
    }
    if (q4_K_interleaved()) {
        by_whole_blocks(offset, n, size_t(REPACK_ROWS) * t->nb[1], pieces, [&](size_t pos) {
            q4k_interleaved_group_pieces(t->nb[1], [&](size_t plain, size_t packed, size_t len) {
                std::memcpy(out + (pos - offset) + plain, base + pos + packed, len);
            });
        });
        return;
    }
    by_whole_blocks(offset, n, sizeof(block_q4_K), pieces,
                    [&](size_t pos) { q4k_convert_block(base + pos, out + (pos - offset)); });
}

void repack_fill(const ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    auto * base = static_cast<char *>(t->data);
    for_each_piece(t, offset, n,
                   [&](size_t at, size_t, size_t len, uint8_t flip) { std::memset(base + at, value ^ flip, len); });
}

void repack_unpack_row(const ggml_tensor * t, int64_t r, void * out) {
    repack_read(t, out, size_t(r) * t->nb[1], t->nb[1]);
}

} // namespace loom::cpu
