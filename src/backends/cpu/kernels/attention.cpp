// GGML_OP_FLASH_ATTN_EXT: softmax(scale * q k^T + slope * mask) v, one
// query row at a time, without materialising the scores.
//
// Each work item is one (query, head, dim-3) row; threads take contiguous
// runs of items, queries varying fastest so that consecutive items read
// the same k and v head, and take up to Q_GROUP consecutive queries of one
// head together. Positions go in blocks of KV_BLOCK: the group's scores come
// from one call of the kernel table's matrix-vector product (k rows against
// the group's queries as its columns, each k row read once for all of
// them), then each query folds its own into its output with an online
// softmax: a
// running maximum M, a running sum S of exp(s - M) and an accumulator of
// exp(s - M) * v, all rescaled by exp(M_old - M_new) when a block raises the
// maximum (once per block, the exponentials of a block in one vector pass).
// Positions whose mask is -inf weigh nothing, and blocks where every
// position is masked are skipped; a row with every position masked has
// S == 0 and is written as zeros.
//
// As in mul_mat, q is first converted to the operand type of k's dot
// product (f16 for f16 k, q8_0 for q4_0 k, q8_1 for q4_1 k ...: ggml's
// vec_dot_type), so k rows are dotted in their own type, through the kernel
// table's matrix-vector product where it has one for the type, else one
// portable dot product per row. v is accumulated in f32 whatever its type:
// f32 and f16 rows are read in place, the rows of other types (bf16, the
// block types of quantized caches) converted to f32 a block at a time.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"
#include "backends/cpu/simd/kernel_table.h"
#include "kernels.h"
#include "vec.h"

namespace loom::cpu {

namespace {

constexpr size_t SCRATCH_ALIGN = 64;

// Positions per block (a multiple of GEMV_ROW_ALIGN).
constexpr int64_t KV_BLOCK = 64;

// Queries of one head whose scores are one product (at most GEMV_MAX_COLS).
constexpr int64_t Q_GROUP = 4;
static_assert(Q_GROUP <= GEMV_MAX_COLS);

// v rows read in place by the table's row accumulation.
bool v_in_place(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16;
}

// A thread's scratch: Q_GROUP accumulators, q rows and score blocks.
struct Slices {
    size_t acc;    // DV floats
    size_t q;      // q row as k's operand type
    size_t scores; // KV_BLOCK floats, then the block's mask terms
    size_t v;      // KV_BLOCK rows of v as f32 (0 where v is read in place)
    size_t per_thread() const { return Q_GROUP * (acc + q + scores) + v; }
};

Slices slices(const ggml_tensor * op) {
    const ggml_tensor * k  = op->src[1];
    const ggml_tensor * v  = op->src[2];
    const int64_t       dk = k->ne[0];
    const int64_t       dv = v->ne[0];
    const VecDotInfo    kd = row_dot_info(k->type);
    const size_t        q  = std::max(size_t(dk) * sizeof(float), kd.dot != nullptr ? ggml_row_size(kd.operand, dk) : 0);
    return {align_up(size_t(dv) * sizeof(float), SCRATCH_ALIGN), align_up(q, SCRATCH_ALIGN),
            2 * KV_BLOCK * sizeof(float),
            v_in_place(v->type) ? 0 : align_up(size_t(KV_BLOCK * dv) * sizeof(float), SCRATCH_ALIGN)};
}

// k rows of this type and length have a dot product against a row q can
// be converted to.
bool k_type_ok(ggml_type t, int64_t dk) {
    const VecDotInfo info = row_dot_info(t);
    return info.dot != nullptr && convertible_operand(info.operand) && dk % ggml_blck_size(t) == 0 &&
           dk % ggml_blck_size(info.operand) == 0;
}

bool v_type_ok(ggml_type t, int64_t dv) {
    return v_in_place(t) ||
           (type_is_valid(t) && type_row(t).to_float != nullptr && dv % ggml_blck_size(t) == 0);
}

inline const char * at(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

void compute_attention(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * q    = dst->src[0];
    const ggml_tensor * k    = dst->src[1];
    const ggml_tensor * v    = dst->src[2];
    const ggml_tensor * mask  = dst->src[3];
    const ggml_tensor * sinks = dst->src[4];
    LOOM_ASSERT(q->type == GGML_TYPE_F32 && k_type_ok(k->type, k->ne[0]) &&
                v_type_ok(v->type, v->ne[0]) && dst->type == GGML_TYPE_F32);

    const int64_t DK     = k->ne[0];
    const int64_t DV     = v->ne[0];
    const int64_t n_q    = q->ne[1];
    const int64_t n_head = q->ne[2];
    const int64_t n_kv   = k->ne[1];
    LOOM_ASSERT(q->ne[0] == DK && v->ne[1] == n_kv);
    LOOM_ASSERT(dst->ne[0] == DV && dst->ne[1] == n_head && dst->ne[2] == n_q && dst->nb[0] == sizeof(float));
    LOOM_ASSERT(n_head % k->ne[2] == 0 && n_head % v->ne[2] == 0 && q->ne[3] % k->ne[3] == 0 &&
                q->ne[3] % v->ne[3] == 0);
    if (mask != nullptr) {
        LOOM_ASSERT(mask->ne[0] >= n_kv && mask->ne[1] >= n_q);
    }

    float       scale    = op_param_f32(dst, 0);
    const float max_bias = op_param_f32(dst, 1);
    const float softcap  = op_param_f32(dst, 2);
    if (softcap != 0.0f) {
        // softcap * tanh(s * scale / softcap), the division folded into scale.
        scale /= softcap;
    }

    const KernelTable & kt       = kernels(p.use_ref);
    const VecDotInfo    kdot     = row_dot_info(k->type);
    const GemvFn        kgemv    = table_gemv(kt, k->type); // null: kdot.dot per row
    const int64_t       rk2      = n_head / k->ne[2];
    const int64_t       rk3      = q->ne[3] / k->ne[3];
    const int64_t       rv2      = n_head / v->ne[2];
    const int64_t       rv3      = q->ne[3] / v->ne[3];
    const bool          mask_f16 = mask != nullptr && mask->type == GGML_TYPE_F16;
    const MadRowsFn     vmad     = v->type == GGML_TYPE_F16 ? kt.mad_rows_f16 : kt.mad_rows_f32;
    const ggml_to_float_t v_to_f32 = v_in_place(v->type) ? nullptr : type_row(v->type).to_float;

    const Slices sl = slices(dst);
    LOOM_ASSERT(p.wsize >= sl.per_thread() * size_t(p.nth));
    char *  scratch = static_cast<char *>(p.wdata) + sl.per_thread() * size_t(p.ith);
    float * accs    = reinterpret_cast<float *>(scratch);                  // query g's at g * sl.acc bytes
    char *  q_ops   = scratch + Q_GROUP * sl.acc;                           // g * sl.q
    float * scores  = reinterpret_cast<float *>(q_ops + Q_GROUP * sl.q);    // query g's at g * KV_BLOCK
    float * mterms  = scores + Q_GROUP * KV_BLOCK;                          // the same
    float * vrows   = reinterpret_cast<float *>(scratch + Q_GROUP * (sl.acc + sl.q + sl.scores)); // v_to_f32's rows
    auto acc_of = [&](int64_t g) { return reinterpret_cast<float *>(reinterpret_cast<char *>(accs) + g * sl.acc); };

    const Range r = split_range(n_q * n_head * q->ne[3], p.ith, p.nth);
    for (int64_t ir0 = r.begin; ir0 < r.end;) {
        const int64_t i3  = ir0 / (n_q * n_head);
        const int64_t h   = ir0 / n_q % n_head;
        const int64_t iq0 = ir0 % n_q;
        const int64_t ng  = std::min({Q_GROUP, r.end - ir0, n_q - iq0}); // queries iq0 .. iq0 + ng - 1

        const float  slope = alibi_slope(max_bias, n_head, h);
        const char * kmat  = at(k, 0, h / rk2, i3 / rk3);
        const char * vmat  = at(v, 0, h / rv2, i3 / rv3);
        const char * mrow[Q_GROUP] = {};
        float        M[Q_GROUP], S[Q_GROUP]; // per query: largest score so far, sum of exp(score - M)
        for (int64_t g = 0; g < ng; ++g) {
            if (mask != nullptr) {
                mrow[g] = at(mask, iq0 + g, h % mask->ne[2], i3 % mask->ne[3]);
            }
            convert_f32_row(kdot.operand, at(q, iq0 + g, h, i3), q->nb[0], q_ops + g * sl.q, DK);
            std::memset(acc_of(g), 0, size_t(DV) * sizeof(float));
            M[g] = -INFINITY;
            S[g] = 0.0f;
        }

        for (int64_t ic0 = 0; ic0 < n_kv; ic0 += KV_BLOCK) {
            const int64_t n = std::min(KV_BLOCK, n_kv - ic0);
            // A query's block counts unless every one of its mask terms is
            // -inf; the block is skipped when no query's counts.
            bool live[Q_GROUP];
            bool any = false;
            for (int64_t g = 0; g < ng; ++g) {
                live[g] = true;
                if (mrow[g] != nullptr) {
                    float * mterm = mterms + g * KV_BLOCK;
                    mask_terms(kt, mrow[g] + ic0 * mask->nb[0], mask_f16, slope, n, mterm);
                    live[g] = !std::all_of(mterm, mterm + n, [](float t) { return t == -INFINITY; });
                }
                any = any || live[g];
            }
            if (!any) {
                continue;
            }
            if (kgemv != nullptr) {
                kgemv(DK, kmat + ic0 * k->nb[1], k->nb[1], n, q_ops, sl.q, int(ng), scores, size_t(KV_BLOCK));
            } else {
                for (int64_t g = 0; g < ng; ++g) {
                    for (int64_t i = 0; i < n; ++i) {
                        scores[g * KV_BLOCK + i] = kdot.dot(DK, kmat + (ic0 + i) * k->nb[1], q_ops + g * sl.q);
                    }
                }
            }
            for (int64_t g = 0; g < ng; ++g) {
                if (!live[g]) {
                    continue;
                }
                float *       sc    = scores + g * KV_BLOCK;
                const float * mterm = mterms + g * KV_BLOCK;
                float *       acc   = acc_of(g);
                if (softcap != 0.0f) {
                    for (int64_t i = 0; i < n; ++i) {
                        const float s = softcap * std::tanh(sc[i] * scale);
                        sc[i]         = mrow[g] != nullptr ? s + mterm[i] : s;
                    }
                } else {
                    // The same two roundings per score as the loop above.
                    kt.scale_f32(n, sc, scale, sc);
                    if (mrow[g] != nullptr) {
                        kt.binary_f32[0](n, sc, mterm, sc);
                    }
                }
                const float bmax = kt.max_f32(n, sc);
                if (!(bmax > -INFINITY)) {
                    continue; // every position masked (or NaN)
                }
                float rescale = 1.0f;
                if (bmax > M[g]) {
                    // The old terms move onto the new maximum (nothing to
                    // move before the first block that counts).
                    rescale = M[g] == -INFINITY ? 0.0f : std::exp(M[g] - bmax);
                    if (M[g] != -INFINITY) {
                        kt.scale_f32(DV, acc, rescale, acc);
                    }
                    M[g] = bmax;
                }
                const float sum = float(kt.exp_sub_sum_f32(n, sc, M[g]));
                S[g]            = S[g] * rescale + sum;
                if (v_to_f32 == nullptr) {
                    vmad(DV, acc, vmat + ic0 * v->nb[1], v->nb[1], n, sc);
                } else {
                    for (int64_t i = 0; i < n; ++i) {
                        v_to_f32(vmat + (ic0 + i) * v->nb[1], vrows + i * DV, DV);
                    }
                    kt.mad_rows_f32(DV, acc, vrows, size_t(DV) * sizeof(float), n, sc);
                }
            }
        }

        for (int64_t g = 0; g < ng; ++g) {
            float * acc = acc_of(g);
            if (sinks != nullptr) {
                // The head's sink is one more score, with no value row.
                const float s = static_cast<const float *>(sinks->data)[h];
                if (s > M[g]) {
                    const float rescale = M[g] == -INFINITY ? 0.0f : std::exp(M[g] - s);
                    kt.scale_f32(DV, acc, rescale, acc);
                    S[g] = S[g] * rescale + 1.0f;
                    M[g] = s;
                } else {
                    S[g] += std::exp(s - M[g]);
                }
            }
            float *     out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + h * dst->nb[1] +
                                                    (iq0 + g) * dst->nb[2] + i3 * dst->nb[3]);
            const float inv = S[g] == 0.0f ? 0.0f : 1.0f / S[g];
            for (int64_t d = 0; d < DV; ++d) {
                out[d] = acc[d] * inv;
            }
        }
        ir0 += ng;
    }
}

bool supports_attention(const ggml_tensor * op) {
    const ggml_tensor * q    = op->src[0];
    const ggml_tensor * k    = op->src[1];
    const ggml_tensor * v    = op->src[2];
    const ggml_tensor * mask = op->src[3];
    const ggml_tensor * sinks = op->src[4];
    if (q == nullptr || k == nullptr || v == nullptr) {
        return false;
    }
    if (sinks != nullptr && !ggml_is_contiguous(sinks)) {
        return false;
    }
    if (!k_type_ok(k->type, k->ne[0]) || !v_type_ok(v->type, v->ne[0])) {
        return false;
    }
    // Rows of k, v, mask and dst are contiguous runs; everything else (all of
    // q, which is converted row by row) goes by strides.
    for (const ggml_tensor * t : {k, v, mask, static_cast<const ggml_tensor *>(op)}) {
        if (t != nullptr && t->nb[0] != ggml_type_size(t->type)) {
            return false;
        }
    }
    return true;
}

size_t work_size_attention(const ggml_tensor * op, int n_threads) {
    return slices(op).per_thread() * size_t(n_threads);
}

} // namespace

void add_attention_kernels(OpKernels & t) {
    t[GGML_OP_FLASH_ATTN_EXT] = {compute_attention, supports_attention, work_size_attention};
}

} // namespace loom::cpu
