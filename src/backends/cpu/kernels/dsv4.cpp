// GGML_OP_LIGHTNING_INDEXER and the DeepSeek V4 hyper-connection operators
// GGML_OP_DSV4_HC_COMB, DSV4_HC_PRE and DSV4_HC_POST, in f32 (keys of the
// indexer also in f16, bf16 and every block type with a to_float, whose
// rows are runs of whole blocks). Every other source is read through its
// strides.
//
// The indexer splits the keys among the threads: a thread converts each of
// its key rows once (into its part of the scratch) and scores it against
// every query. The others split their outputs (tokens for hc_comb,
// elements for hc_pre and hc_post). Each output is computed by one thread in
// a fixed order, so results do not depend on the thread count.

#include <algorithm>
#include <cmath>

#include "core/common.h"
#include "core/fits.h"
#include "core/fp16.h"
#include "core/types.h"
#include "kernels.h"

namespace loom::cpu {

namespace {

constexpr size_t  SCRATCH_ALIGN = 64;
constexpr int64_t HC            = 4; // the streams hc_comb is defined for

float load(const ggml_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return *reinterpret_cast<const float *>(static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] +
                                            i2 * t->nb[2] + i3 * t->nb[3]);
}

float * store(ggml_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return reinterpret_cast<float *>(static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                                     i3 * t->nb[3]);
}

// ---- lightning indexer ----

// The shapes and types are the operator's rule; keys of a block type are
// decoded a whole row at a time.
bool indexer_fits(const ggml_tensor * op) {
    const ggml_tensor * k = op->src[1];
    if (!node_fits(op, nullptr)) {
        return false;
    }
    if (k->type != GGML_TYPE_F32 && k->type != GGML_TYPE_F16 && k->type != GGML_TYPE_BF16) {
        return type_is_valid(k->type) && ggml_is_quantized(k->type) && type_row(k->type).to_float != nullptr &&
               k->nb[0] == ggml_type_size(k->type) && k->ne[0] % ggml_blck_size(k->type) == 0;
    }
    return true;
}

size_t indexer_thread_bytes(const ggml_tensor * op) {
    return align_up(size_t(op->src[0]->ne[0]) * sizeof(float), SCRATCH_ALIGN);
}

size_t work_size_indexer(const ggml_tensor * op, int n_threads) {
    return indexer_thread_bytes(op) * size_t(n_threads);
}

void compute_indexer(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(indexer_fits(dst));
    const ggml_tensor * q = dst->src[0], *k = dst->src[1], *w = dst->src[2], *m = dst->src[3];
    const int64_t       n_embd = q->ne[0], n_head = q->ne[1], n_batch = q->ne[2], n_stream = q->ne[3];
    LOOM_ASSERT(p.wsize >= indexer_thread_bytes(dst) * size_t(p.nth));
    auto * key = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + indexer_thread_bytes(dst) * size_t(p.ith));

    // Block-type keys: each row decoded whole.
    const ggml_to_float_t blocks_to_f32 = ggml_is_quantized(k->type) ? type_row(k->type).to_float : nullptr;
    const Range           r             = split_range(k->ne[2], p.ith, p.nth);
    for (int64_t s = 0; s < n_stream; ++s) {
        for (int64_t j = r.begin; j < r.end; ++j) {
            const char * row = static_cast<const char *>(k->data) + j * k->nb[2] + s * k->nb[3];
            if (blocks_to_f32 != nullptr) {
                blocks_to_f32(row, key, n_embd);
            } else {
                for (int64_t e = 0; e < n_embd; ++e) {
                    const char * at = row + e * k->nb[0];
                    switch (k->type) {
                        case GGML_TYPE_F16: key[e] = fp16_to_fp32(*reinterpret_cast<const ggml_fp16_t *>(at)); break;
                        case GGML_TYPE_BF16: key[e] = bf16_to_fp32(*reinterpret_cast<const uint16_t *>(at)); break;
                        case GGML_TYPE_F32: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
                        case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K:
                        case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
                        case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
                        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
                        case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32:
                        case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0:
                        case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0:
                        case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT: key[e] = *reinterpret_cast<const float *>(at); break;
                    }
                }
            }
            for (int64_t t = 0; t < n_batch; ++t) {
                float score = 0.0f;
                for (int64_t h = 0; h < n_head; ++h) {
                    float qk = 0.0f;
                    for (int64_t e = 0; e < n_embd; ++e) qk += load(q, e, h, t, s) * key[e];
                    score += std::max(qk, 0.0f) * load(w, h, t, 0, s);
                }
                const auto mv = *reinterpret_cast<const ggml_fp16_t *>(static_cast<const char *>(m->data) +
                                                                       j * m->nb[0] + t * m->nb[1] +
                                                                       (s % m->ne[3]) * m->nb[3]);
                *store(dst, j, t, 0, s) = score + fp16_to_fp32(mv);
            }
        }
    }
}

// ---- hc_comb ----

// F32 data of the operator's rule (as the other hyper-connection operators).
bool hc_comb_fits(const ggml_tensor * op) {
    return node_fits(op, nullptr);
}

// c[d + HC s] /= eps + its sum over s (over_src) or over d.
void normalise(float * c, float eps, bool over_src) {
    for (int64_t a = 0; a < HC; ++a) {
        float sum = eps;
        for (int64_t b = 0; b < HC; ++b) sum += over_src ? c[a + HC * b] : c[b + HC * a];
        const float inv = 1.0f / sum;
        for (int64_t b = 0; b < HC; ++b) (over_src ? c[a + HC * b] : c[b + HC * a]) *= inv;
    }
}

void compute_hc_comb(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(hc_comb_fits(dst));
    const ggml_tensor * mixes = dst->src[0], *scale = dst->src[1], *base = dst->src[2];
    const float         eps    = op_param_f32(dst, 0);
    const int32_t       n_iter = op_param_i32(dst, 1);
    const float         sc     = load(scale, 2);
    const Range         r      = split_range(mixes->ne[1], p.ith, p.nth);
    for (int64_t t = r.begin; t < r.end; ++t) {
        float c[HC * HC];
        for (int64_t s = 0; s < HC; ++s) {
            float max = -INFINITY;
            for (int64_t d = 0; d < HC; ++d) {
                const int64_t i = 2 * HC + d + HC * s;
                c[d + HC * s]   = load(mixes, i, t) * sc + load(base, i);
                max             = std::max(max, c[d + HC * s]);
            }
            float sum = 0.0f;
            for (int64_t d = 0; d < HC; ++d) {
                c[d + HC * s] = std::exp(c[d + HC * s] - max);
                sum += c[d + HC * s];
            }
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < HC; ++d) c[d + HC * s] = c[d + HC * s] * inv + eps;
        }
        normalise(c, eps, true);
        for (int32_t it = 1; it < n_iter; ++it) {
            normalise(c, eps, false);
            normalise(c, eps, true);
        }
        for (int64_t s = 0; s < HC; ++s) {
            for (int64_t d = 0; d < HC; ++d) *store(dst, d, s, t) = c[d + HC * s];
        }
    }
}

// ---- hc_pre ----

bool hc_pre_fits(const ggml_tensor * op) {
    return node_fits(op, nullptr);
}

void compute_hc_pre(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(hc_pre_fits(dst));
    const ggml_tensor * x = dst->src[0], *w = dst->src[1];
    const float         scale = op_param_f32(dst, 0);
    const bool          gated = op_param_i32(dst, 1) != 0;
    const int64_t       n_embd = x->ne[0], hc = x->ne[1];
    const Range         r = split_range(n_embd * x->ne[2], p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const int64_t i = ir % n_embd, t = ir / n_embd;
        float         sum = 0.0f;
        for (int64_t h = 0; h < hc; ++h) {
            const float wv = gated ? 1.0f / (1.0f + std::exp(-load(w, i, h, t))) : load(w, h, t);
            sum += load(x, i, h, t) * wv;
        }
        *store(dst, i, t) = scale * sum;
    }
}

// ---- hc_post ----

bool hc_post_fits(const ggml_tensor * op) {
    return node_fits(op, nullptr);
}

void compute_hc_post(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(hc_post_fits(dst));
    const ggml_tensor * x = dst->src[0], *res = dst->src[1], *post = dst->src[2], *comb = dst->src[3];
    const int64_t       n_embd = x->ne[0], hc = res->ne[1];
    const Range         r = split_range(n_embd * hc * x->ne[1], p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const int64_t i = ir % n_embd, d = ir / n_embd % hc, t = ir / (n_embd * hc);
        float         sum = load(x, i, t) * load(post, d, t);
        if (comb != nullptr) {
            for (int64_t s = 0; s < hc; ++s) sum += load(res, i, s, t) * load(comb, d, s, t);
        } else {
            sum += load(res, i, d, t);
        }
        *store(dst, i, d, t) = sum;
    }
}

} // namespace

void add_dsv4_kernels(OpKernels & t) {
    t[GGML_OP_LIGHTNING_INDEXER] = {compute_indexer, indexer_fits, work_size_indexer};
    t[GGML_OP_DSV4_HC_COMB]      = {compute_hc_comb, hc_comb_fits, nullptr};
    t[GGML_OP_DSV4_HC_PRE]       = {compute_hc_pre, hc_pre_fits, nullptr};
    t[GGML_OP_DSV4_HC_POST]      = {compute_hc_post, hc_post_fits, nullptr};
}

} // namespace loom::cpu
