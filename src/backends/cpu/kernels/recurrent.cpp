// GGML_OP_RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7, GATED_DELTA_NET and
// SOLVE_TRI, in f32.
//
// The recurrences keep one S x S matrix per head and sequence. Items are
// (sequence, head) pairs, each run through its tokens in order by one
// thread, with the matrix updated in place in dst's state part (or, for the
// gated delta rule, in its final-state slot); every output element is a
// float sum in a fixed order, so results do not depend on the thread count.
//
// Layouts (ggml 0.25.1's): per-token inputs are [S, H, n_tokens]; the
// tokens of sequence s are [s * T / n_seqs, (s + 1) * T / n_seqs). The
// result is [S * H, T + S * n_seqs]: the outputs (token t, head h at row t,
// column h * S), then the states [S, S, H, n_seqs], whose layout the input
// state shares.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"
#include "core/fits.h"
#include "kernels.h"

namespace loom::cpu {

namespace {

constexpr size_t SCRATCH_ALIGN = 64;

bool all_f32(const ggml_tensor * op, int n_src) {
    if (op->type != GGML_TYPE_F32 || !ggml_is_contiguous(op)) {
        return false;
    }
    for (int i = 0; i < n_src; ++i) {
        if (op->src[i] == nullptr || op->src[i]->type != GGML_TYPE_F32) {
            return false;
        }
    }
    return true;
}

// The three RWKV-style recurrences take F32 data (their n_src sources and
// the result); their shapes are their operators' rules.
bool rwkv_fits(const ggml_tensor * op, int n_src) {
    return all_f32(op, n_src) && node_fits(op, nullptr);
}

struct RwkvShape {
    int64_t S, H, T, n_seqs, per_seq;
};

RwkvShape rwkv_shape(const ggml_tensor * shape, const ggml_tensor * state) {
    const int64_t n_seqs = state->ne[1];
    return {shape->ne[0], shape->ne[1], shape->ne[2], n_seqs, shape->ne[2] / n_seqs};
}

const float * f32(const ggml_tensor * t) {
    return static_cast<const float *>(t->data);
}

// Runs step(h, t, prev, cur, out) for this thread's (sequence, head) items:
// prev is the matrix before token t (the input state for a sequence's first
// token), cur where the new one goes (prev == cur after the first token),
// out the token's S outputs for head h.
template <typename Step>
void run_rwkv(const ComputeParams & p, ggml_tensor * dst, const RwkvShape & sh, const ggml_tensor * state,
              Step && step) {
    const int64_t C      = sh.S * sh.H;
    float *       out    = static_cast<float *>(dst->data);
    float *       states = out + C * sh.T;
    const Range   r      = split_range(sh.n_seqs * sh.H, p.ith, p.nth);
    for (int64_t item = r.begin; item < r.end; ++item) {
        const int64_t seq = item / sh.H;
        const int64_t h   = item % sh.H;
        const size_t  at  = size_t((seq * sh.H + h) * sh.S * sh.S);
        float *       cur = states + at;
        for (int64_t i = 0; i < sh.per_seq; ++i) {
            const int64_t t    = seq * sh.per_seq + i;
            const float * prev = i == 0 ? f32(state) + at : cur;
            step(h, t, prev, cur, out + t * C + h * sh.S);
        }
    }
}

// ---- RWKV-6 and gated linear attention ----
// S[i][j], i along k, j along v: row i of a head's matrix is contiguous.

void compute_wkv6(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(rwkv_fits(dst, 6));
    const RwkvShape sh = rwkv_shape(dst->src[0], dst->src[5]);
    const float *   k = f32(dst->src[0]), *v = f32(dst->src[1]), *r = f32(dst->src[2]);
    const float *   tf = f32(dst->src[3]), *td = f32(dst->src[4]);
    const int64_t   S  = sh.S;
    run_rwkv(p, dst, sh, dst->src[5], [&](int64_t h, int64_t t, const float * prev, float * cur, float * out) {
        const int64_t base = (t * sh.H + h) * S;
        std::fill(out, out + S, 0.0f);
        for (int64_t i = 0; i < S; ++i) {
            const float   ki = k[base + i], ri = r[base + i], tfi = tf[h * S + i], tdi = td[base + i];
            const float * vs = v + base;
            const float * pr = prev + i * S;
            float *       cr = cur + i * S;
            for (int64_t j = 0; j < S; ++j) {
                const float kv = ki * vs[j];
                const float s  = pr[j];
                out[j] += (kv * tfi + s) * ri;
                cr[j] = s * tdi + kv;
            }
        }
    });
}

void compute_gla(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(rwkv_fits(dst, 5));
    const RwkvShape sh    = rwkv_shape(dst->src[0], dst->src[4]);
    const float *   k     = f32(dst->src[0]), *v = f32(dst->src[1]), *q = f32(dst->src[2]), *g = f32(dst->src[3]);
    const float     scale = op_param_f32(dst, 0);
    const int64_t   S     = sh.S;
    run_rwkv(p, dst, sh, dst->src[4], [&](int64_t h, int64_t t, const float * prev, float * cur, float * out) {
        const int64_t base = (t * sh.H + h) * S;
        std::fill(out, out + S, 0.0f);
        for (int64_t i = 0; i < S; ++i) {
            const float   ki = k[base + i], qi = q[base + i] * scale, gi = g[base + i];
            const float * vs = v + base;
            const float * pr = prev + i * S;
            float *       cr = cur + i * S;
            for (int64_t j = 0; j < S; ++j) {
                const float s = pr[j] * gi + ki * vs[j];
                out[j] += s * qi;
                cr[j] = s;
            }
        }
    });
}

// ---- RWKV-7 ----
// S[i][j], i along v, j along k.

void compute_wkv7(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(rwkv_fits(dst, 7));
    const RwkvShape sh = rwkv_shape(dst->src[2], dst->src[6]);
    const float *   r = f32(dst->src[0]), *w = f32(dst->src[1]), *k = f32(dst->src[2]);
    const float *   v = f32(dst->src[3]), *a = f32(dst->src[4]), *b = f32(dst->src[5]);
    const int64_t   S = sh.S;
    const KernelTable & kt = kernels(p.use_ref);
    // Row i: sa = a . row, then row = row w + v_i k + sa b (the first
    // token's from the input state), out_i = row . r; a head's rows in one
    // call of the table (wkv7_rows_f32).
    run_rwkv(p, dst, sh, dst->src[6], [&](int64_t h, int64_t t, const float * prev, float * cur, float * out) {
        const int64_t base = (t * sh.H + h) * S;
        kt.wkv7_rows_f32(S, S, prev, cur, r + base, w + base, k + base, v + base, a + base, b + base, out);
    });
}

// ---- gated delta rule ----
// The state is stored transposed: row j of a head's matrix M is column j of
// S (M[j][i] = S[i][j], i along k, j along v). Row j's update needs only
// row j: M[j] scaled by the gate, d = beta (v[j] - M[j] . k), M[j] += d k,
// out[j] = M[j] . q / sqrt(S).

// F32 data; the shapes and layouts are the operator's rule.
bool gdn_fits(const ggml_tensor * op) {
    return all_f32(op, 6) && node_fits(op, nullptr);
}

// Each thread's exp(g) row for a vector gate.
size_t gdn_thread_bytes(const ggml_tensor * op) {
    return align_up(size_t(op->src[2]->ne[0]) * sizeof(float), SCRATCH_ALIGN);
}

size_t work_size_gdn(const ggml_tensor * op, int n_threads) {
    return op->src[3]->ne[0] == 1 ? 0 : gdn_thread_bytes(op) * size_t(n_threads);
}

const float * row_at(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<const float *>(static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] +
                                           i3 * t->nb[3]);
}

void compute_gdn(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(gdn_fits(dst));
    const ggml_tensor * q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    const ggml_tensor * g = dst->src[3], *beta = dst->src[4], *state = dst->src[5];
    const int64_t       S = v->ne[0], H = v->ne[1], T = v->ne[2], n_seqs = v->ne[3];
    const int64_t       K      = op_param_i32(dst, 0);
    const bool          vector = g->ne[0] == S && S != 1;
    const int64_t       hq = q->ne[1], rq = n_seqs / q->ne[3];
    const float         scale = 1.0f / std::sqrt(float(S));
    const size_t        mat   = size_t(S * S);
    float *             out_base   = static_cast<float *>(dst->data);
    float *             state_base = out_base + S * H * T * n_seqs;
    const size_t        per_slot   = mat * size_t(H * n_seqs);
    const KernelTable & kt         = kernels(p.use_ref);
    float *             eg = nullptr;
    if (g->ne[0] != 1) {
        LOOM_ASSERT(p.wsize >= gdn_thread_bytes(dst) * size_t(p.nth));
        eg = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + gdn_thread_bytes(dst) * size_t(p.ith));
    }
    if (K > 1 && T == 0) {
        return; // no slot is written
    }

    const Range r = split_range(n_seqs * H, p.ith, p.nth);
    for (int64_t item = r.begin; item < r.end; ++item) {
        const int64_t seq = item / H;
        const int64_t h   = item % H;
        // The final-state slot is the working matrix; snapshots copy it.
        float * M = state_base + (seq * H + h) * mat;
        std::memcpy(M, f32(state) + (seq * H + h) * mat, mat * sizeof(float));
        for (int64_t t = 0; t < T; ++t) {
            const float * qs = row_at(q, h % hq, t, seq / rq);
            const float * ks = row_at(k, h % hq, t, seq / rq);
            const float * vs = row_at(v, h, t, seq);
            const float * gs = f32(g) + ((seq * T + t) * H + h) * g->ne[0];
            const float   bt = f32(beta)[(seq * T + t) * H + h];
            float *       out = out_base + ((seq * T + t) * H + h) * S;
            if (eg != nullptr) {
                for (int64_t i = 0; i < S; ++i) eg[i] = std::exp(gs[i]);
            }
            const float eg0 = std::exp(gs[0]);
            for (int64_t j = 0; j < S; ++j) {
                out[j] = kt.delta_row_f32(S, M + j * S, vector ? eg : nullptr, eg0, ks, vs[j], bt, qs) * scale;
            }
            const int64_t slot = T - 1 - t;
            if (slot > 0 && slot < K) {
                std::memcpy(state_base + size_t(slot) * per_slot + (seq * H + h) * mat, M, mat * sizeof(float));
            }
        }
    }
}

// ---- triangular solve ----
// A X = B with A lower triangular, by forward substitution; one column of
// X per item.

// F32 data; the shapes and layouts are the operator's rule.
bool solve_tri_fits(const ggml_tensor * op) {
    return all_f32(op, 2) && node_fits(op, nullptr);
}

void compute_solve_tri(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(solve_tri_fits(dst));
    const ggml_tensor * a = dst->src[0], *b = dst->src[1];
    const int64_t       n = a->ne[0], nk = b->ne[0];
    const Range         r = split_range(nk * b->ne[2] * b->ne[3], p.ith, p.nth);
    for (int64_t item = r.begin; item < r.end; ++item) {
        const int64_t batch = item / nk;
        const int64_t col   = item % nk;
        const float * A     = f32(a) + batch * n * n;
        const float * B     = f32(b) + batch * n * nk;
        float *       X     = static_cast<float *>(dst->data) + batch * n * nk;
        for (int64_t i = 0; i < n; ++i) {
            float sum = 0.0f;
            for (int64_t j = 0; j < i; ++j) {
                sum += A[i * n + j] * X[j * nk + col];
            }
            X[i * nk + col] = (B[i * nk + col] - sum) / A[i * n + i];
        }
    }
}

bool supports_wkv6(const ggml_tensor * op) {
    return rwkv_fits(op, 6);
}
bool supports_gla(const ggml_tensor * op) {
    return rwkv_fits(op, 5);
}
bool supports_wkv7(const ggml_tensor * op) {
    return rwkv_fits(op, 7);
}

} // namespace

void add_recurrent_kernels(OpKernels & t) {
    t[GGML_OP_RWKV_WKV6]         = {compute_wkv6, supports_wkv6, nullptr};
    t[GGML_OP_GATED_LINEAR_ATTN] = {compute_gla, supports_gla, nullptr};
    t[GGML_OP_RWKV_WKV7]         = {compute_wkv7, supports_wkv7, nullptr};
    t[GGML_OP_GATED_DELTA_NET]   = {compute_gdn, gdn_fits, work_size_gdn};
    t[GGML_OP_SOLVE_TRI]         = {compute_solve_tri, solve_tri_fits, nullptr};
}

} // namespace loom::cpu
