// GGML_OP_ROPE: rotary position embedding with YaRN scaling, and
// GGML_OP_ROPE_BACK, its gradient: the inverse rotation (sin negated).
//
// Pair i of the first n_dims values of a row (adjacent values in normal
// mode, values n_dims/2 apart in NEOX mode) is rotated by theta_i(pos),
// pos = positions[i2]. The angles depend only on the position, so each
// thread keeps tables of cos and sin per pair in its scratch slice and
// rebuilds them only when its rows move on to the next token; heads of one
// token (dim 1) reuse them. The rotation is the kernel table's (rope_f32);
// f16 rows are converted to f32 in the scratch slice and back. Values past
// n_dims are copied.
//
// The base angle advances by a factor theta_scale = freq_base^(-2/n_dims)
// per pair (theta_i = pos * theta_scale^i, built by repeated
// multiplication), the rounding ggml's tables have.
//
// Multi-section modes (MROPE, IMROPE, VISION) take four positions per token
// (positions[i2 + k * ne2], k = t, h, w, e) and give pair i the angle of
// the coordinate its section names; every coordinate's angle advances by
// theta_scale per pair. VISION rotates pairs (i, i + n_dims) of the whole
// row and restarts each section's angle at the section's first pair. An
// offset (ggml_rope_set_offset, op_params[15]) moves the rotated values to
// [n_offs, n_offs + n_dims).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/common.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "kernels.h"

namespace loom::cpu {

namespace {

constexpr size_t SCRATCH_ALIGN = 64;

struct RopeParams {
    int   n_dims;
    int   mode;
    int   n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int   sections[GGML_MROPE_SECTIONS];
    int   n_offs;
    float sin_sign; // 1, or -1 for ROPE_BACK (its kernel sets it)

    static RopeParams of(const ggml_tensor * op) {
        RopeParams rp{op_param_i32(op, 1), op_param_i32(op, 2), op_param_i32(op, 4), op_param_f32(op, 5),
                      op_param_f32(op, 6), op_param_f32(op, 7), op_param_f32(op, 8), op_param_f32(op, 9),
                      op_param_f32(op, 10), {op_param_i32(op, 11), op_param_i32(op, 12), op_param_i32(op, 13),
                      op_param_i32(op, 14)}, op_param_i32(op, 15), 1.0f};
        return rp;
    }
    bool multi() const { return (mode & GGML_ROPE_TYPE_MROPE) != 0; }
    bool vision() const { return mode == GGML_ROPE_TYPE_VISION; }
    // Rotated pairs per row.
    int pairs() const { return vision() ? n_dims : n_dims / 2; }
};

// The cos and sin tables (one float per pair each), then an f16 row as f32.
size_t cache_bytes(const ggml_tensor * op) {
    return align_up(size_t(2 * RopeParams::of(op).pairs()) * sizeof(float), SCRATCH_ALIGN);
}

size_t thread_scratch(const ggml_tensor * op) {
    const size_t row = op->type == GGML_TYPE_F16 ? size_t(op->src[0]->ne[0]) * sizeof(float) : 0;
    return cache_bytes(op) + align_up(row, SCRATCH_ALIGN);
}

// cos[i] and sin[i] of pair i with the unscaled angle theta (YaRN blend,
// frequency factor, magnitude, and the sign of sin).
void set_pair(const RopeParams & rp, const float corr[2], const ggml_tensor * factors, int i, float theta_base,
              float * cos, float * sin) {
    float mscale = rp.attn_factor;
    if (rp.ext_factor != 0.0f) {
        mscale *= 1.0f + 0.1f * std::log(1.0f / rp.freq_scale);
    }
    float ff = 1.0f;
    if (factors != nullptr) {
        std::memcpy(&ff, static_cast<const char *>(factors->data) + size_t(i) * factors->nb[0], sizeof(ff));
    }
    const float theta_extrap = theta_base / ff;
    const float theta_interp = rp.freq_scale * theta_extrap;
    float       theta        = theta_interp;
    if (rp.ext_factor != 0.0f) {
        const float y    = (float(i) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
        const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * rp.ext_factor;
        theta            = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
    }
    cos[i] = std::cos(theta) * mscale;
    sin[i] = std::sin(theta) * mscale * rp.sin_sign;
}

// The multi-section tables: pos[k] is coordinate k (t, h, w, e) of the token.
void build_multi_cache(const RopeParams & rp, float theta_scale, const float corr[2], const ggml_tensor * factors,
                       const float pos[4], float * cos, float * sin) {
    const int * sec       = rp.sections;
    // In 64 bits: the sections are bounded by the row length, not by int.
    const int64_t sect_dims = int64_t(sec[0]) + sec[1] + sec[2] + sec[3];
    const int64_t sec_w     = int64_t(sec[0]) + sec[1];
    const int64_t sec_e     = sec_w + sec[2];
    const bool  imrope    = rp.mode == GGML_ROPE_TYPE_IMROPE;
    float       theta[4]  = {pos[0], pos[1], pos[2], pos[3]};
    for (int i = 0; i < rp.pairs(); ++i) {
        const int64_t sector = i % sect_dims;
        if (rp.vision()) {
            // Each section counts its angles from its own first pair.
            const int64_t starts[4] = {0, sec[0], sec_w, sec_e};
            for (int k = 0; k < 4; ++k) {
                if (sector == starts[k]) {
                    theta[k] = pos[k];
                    break;
                }
            }
        }
        int k = 0; // the coordinate of pair i
        if (imrope) {
            if (sector % 3 == 1 && sector < 3 * int64_t(sec[1])) {
                k = 1;
            } else if (sector % 3 == 2 && sector < 3 * int64_t(sec[2])) {
                k = 2;
            } else if (sector % 3 == 0 && sector < 3 * int64_t(sec[0])) {
                k = 0;
            } else {
                k = 3;
            }
        } else {
            k = sector < sec[0] ? 0 : sector < sec_w ? 1 : sector < sec_e ? 2 : 3;
        }
        set_pair(rp, corr, factors, i, theta[k], cos, sin);
        for (float & t : theta) {
            t *= theta_scale;
        }
    }
}

// Fills cos[i] and sin[i] with the cosine and sine of pair i's angle at pos.
void build_cache(const RopeParams & rp, float theta_scale, const float corr[2], const ggml_tensor * factors, float pos,
                 float * cos, float * sin) {
    float theta_base = pos;
    for (int i = 0; i < rp.n_dims / 2; ++i) {
        set_pair(rp, corr, factors, i, theta_base, cos, sin);
        theta_base *= theta_scale;
    }
}

template <typename T>
void rope_rows(const ComputeParams & p, ggml_tensor * dst, float sin_sign) {
    const ggml_tensor * src     = dst->src[0];
    const ggml_tensor * pos     = dst->src[1];
    const ggml_tensor * factors = dst->src[2];
    RopeParams          rp      = RopeParams::of(dst);
    rp.sin_sign                 = sin_sign;
    LOOM_ASSERT(rp.n_dims >= 0 && rp.n_dims % 2 == 0 && rp.n_dims <= src->ne[0]);
    LOOM_ASSERT(pos->ne[0] >= (rp.multi() ? 4 : 1) * src->ne[2]);

    const int64_t ne0  = src->ne[0];
    const int64_t ne1  = src->ne[1];
    const int64_t ne2  = src->ne[2];
    const int64_t half  = rp.pairs();
    const int64_t width = 2 * half;   // rotated values per row
    const int64_t offs  = rp.n_offs;  // the first of them
    const bool    neox  = rp.mode != GGML_ROPE_TYPE_NORMAL;
    const KernelTable & kt = kernels(p.use_ref);

    // n_dims 0 rotates nothing: the row is copied.
    const float theta_scale = rp.n_dims > 0 ? std::pow(rp.freq_base, -2.0f / float(rp.n_dims)) : 1.0f;
    float       corr[2];
    ggml_rope_yarn_corr_dims(rp.n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);

    const size_t slice = thread_scratch(dst);
    LOOM_ASSERT(p.wsize >= slice * size_t(p.nth));
    char * const  mine  = static_cast<char *>(p.wdata) + slice * size_t(p.ith);
    float * const cos   = reinterpret_cast<float *>(mine);
    float * const sin   = cos + half;
    float * const row   = reinterpret_cast<float *>(mine + cache_bytes(dst)); // f16 rows only

    int64_t     cached_i2 = -1;
    const Range r         = split_range(ne1 * ne2 * src->ne[3], p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const int64_t i3 = ir / (ne1 * ne2);
        const int64_t i2 = ir / ne1 % ne2;
        const int64_t i1 = ir % ne1;
        if (i2 != cached_i2) {
            auto position = [&](int64_t k) {
                int32_t v;
                std::memcpy(&v, static_cast<const char *>(pos->data) + (i2 + k * ne2) * pos->nb[0], sizeof(v));
                return float(v);
            };
            if (rp.multi()) {
                const float coords[4] = {position(0), position(1), position(2), position(3)};
                build_multi_cache(rp, theta_scale, corr, factors, coords, cos, sin);
            } else {
                build_cache(rp, theta_scale, corr, factors, position(0), cos, sin);
            }
            cached_i2 = i2;
        }

        const auto * x = reinterpret_cast<const T *>(static_cast<const char *>(src->data) + i1 * src->nb[1] +
                                                     i2 * src->nb[2] + i3 * src->nb[3]);
        auto *       y =
            reinterpret_cast<T *>(static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        // The kernel reads both values of a pair before it writes either,
        // so x may be y.
        if constexpr (std::is_same_v<T, float>) {
            kt.rope_f32(half, x + offs, y + offs, cos, sin, neox);
        } else {
            kt.fp16_to_fp32_row(x + offs, row, width);
            kt.rope_f32(half, row, row, cos, sin, neox);
            kt.fp32_to_fp16_row(row, y + offs, width);
        }
        if (static_cast<const void *>(x) != static_cast<const void *>(y)) {
            std::memcpy(y, x, size_t(offs) * sizeof(T));
            std::memcpy(y + offs + width, x + offs + width, size_t(ne0 - offs - width) * sizeof(T));
        }
    }
}

// ROPE, and ROPE_BACK (back: the inverse rotation).
template <bool back>
void compute_rope(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(dst->type == dst->src[0]->type);
    const float sin_sign = back ? -1.0f : 1.0f;
    switch (dst->type) {
        case GGML_TYPE_F32:
            rope_rows<float>(p, dst, sin_sign);
            break;
        case GGML_TYPE_F16:
            rope_rows<ggml_fp16_t>(p, dst, sin_sign);
            break;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            LOOM_ASSERT(false && "compute_rope: unsupported type");
    }
}

// Modes, positions, frequency factors, sections and the offset are the
// operator's rule; rows are read and written as contiguous runs.
bool supports_rope(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && src->nb[0] == ggml_type_size(src->type) && op->nb[0] == ggml_type_size(op->type);
}

size_t work_size_rope(const ggml_tensor * op, int n_threads) {
    return thread_scratch(op) * size_t(n_threads);
}

} // namespace

void add_rope_kernels(OpKernels & t) {
    t[GGML_OP_ROPE]      = {compute_rope<false>, supports_rope, work_size_rope};
    t[GGML_OP_ROPE_BACK] = {compute_rope<true>, supports_rope, work_size_rope};
}

} // namespace loom::cpu
