// GGML_OP_SSM_CONV and GGML_OP_SSM_SCAN: Mamba's causal convolution and
// selective scan, in f32.
//
// ssm_conv: channels are split among the threads; each output is one float
// sum over the window in order. ssm_scan: items are (sequence, head) pairs,
// each run through its tokens in order by one thread; the state lives in
// dst's state part and is updated there token after token.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"
#include "core/fits.h"
#include "kernels.h"

namespace loom::cpu {

namespace {

const float * at_f32(const ggml_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return reinterpret_cast<const float *>(static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] +
                                           i2 * t->nb[2] + i3 * t->nb[3]);
}

bool all_f32(const ggml_tensor * op, int n_src) {
    if (op->type != GGML_TYPE_F32) {
        return false;
    }
    for (int i = 0; i < n_src; ++i) {
        if (op->src[i] == nullptr || op->src[i]->type != GGML_TYPE_F32) {
            return false;
        }
    }
    return true;
}

// ---- ssm_conv ----

// F32 data; the shapes are the operator's rule.
bool ssm_conv_fits(const ggml_tensor * op) {
    return all_f32(op, 2) && node_fits(op, nullptr);
}

void compute_ssm_conv(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * sx = dst->src[0];
    const ggml_tensor * c  = dst->src[1];
    LOOM_ASSERT(ssm_conv_fits(dst));
    const int64_t d_conv = c->ne[0];
    const Range   r      = split_range(dst->ne[0], p.ith, p.nth);
    for (int64_t s = 0; s < dst->ne[2]; ++s) {
        for (int64_t t = 0; t < dst->ne[1]; ++t) {
            auto * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + t * dst->nb[1] + s * dst->nb[2]);
            for (int64_t i = r.begin; i < r.end; ++i) {
                float sum = 0.0f;
                for (int64_t j = 0; j < d_conv; ++j) {
                    sum += *at_f32(sx, t + j, i, s) * *at_f32(c, j, i);
                }
                *reinterpret_cast<float *>(reinterpret_cast<char *>(out) + i * dst->nb[0]) = sum;
            }
        }
    }
}

// ---- ssm_scan ----

float softplus(float x) {
    return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

// F32 data (the ids are the rule's), a contiguous result; the shapes and
// the layouts of the sources are the operator's rule.
bool ssm_scan_fits(const ggml_tensor * op) {
    return all_f32(op, 6) && node_fits(op, nullptr) && ggml_is_contiguous(op);
}

// Mamba-1's per-token decays exp(dt A[h][j]), one row per thread.
size_t ssm_scan_thread_bytes(const ggml_tensor * op) {
    return align_up(size_t(op->src[0]->ne[0]) * sizeof(float), 64);
}

size_t work_size_ssm_scan(const ggml_tensor * op, int n_threads) {
    return op->src[3]->ne[0] != 1 ? ssm_scan_thread_bytes(op) * size_t(n_threads) : 0;
}

void compute_ssm_scan(const ComputeParams & p, ggml_tensor * dst) {
    LOOM_ASSERT(ssm_scan_fits(dst));
    const ggml_tensor * s0  = dst->src[0];
    const ggml_tensor * x   = dst->src[1];
    const ggml_tensor * dt  = dst->src[2];
    const ggml_tensor * A   = dst->src[3];
    const ggml_tensor * B   = dst->src[4];
    const ggml_tensor * C   = dst->src[5];
    const ggml_tensor * ids = dst->src[6];

    const int64_t d_state  = s0->ne[0];
    const int64_t head_dim = x->ne[0];
    const int64_t n_head   = x->ne[1];
    const int64_t n_tok    = x->ne[2];
    const int64_t n_seqs   = x->ne[3];
    const int64_t n_group  = B->ne[1];
    const int64_t K        = op_param_i32(dst, 0);
    const bool    mamba1   = A->ne[0] != 1;

    const int64_t head_state = d_state * head_dim; // floats of one head's state
    float *       y_base     = static_cast<float *>(dst->data);
    float *       s_base     = y_base + ggml_nelements(x);
    const auto *  A_data     = static_cast<const float *>(A->data);
    const KernelTable & kt   = kernels(p.use_ref);
    float *             decay = nullptr;
    if (mamba1) {
        LOOM_ASSERT(p.wsize >= ssm_scan_thread_bytes(dst) * size_t(p.nth));
        decay = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + ssm_scan_thread_bytes(dst) * size_t(p.ith));
    }

    const Range r = split_range(n_seqs * n_head, p.ith, p.nth);
    for (int64_t item = r.begin; item < r.end; ++item) {
        const int64_t seq = item / n_head;
        const int64_t h   = item % n_head;
        const int64_t g   = h / (n_head / n_group);
        const int32_t id  = *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) + seq * ids->nb[0]);
        float *       st  = s_base + (seq * n_head + h) * head_state;
        // id is one of s's states (checked before the kernel, Note [Index
        // sources] in core/op_table.h). The first token reads it where it is.
        const float * from = at_f32(s0, 0, 0, h, id);
        if (n_tok == 0) {
            std::memcpy(st, from, size_t(head_state) * sizeof(float));
        }
        for (int64_t t = 0; t < n_tok; ++t) {
            const float * xs  = at_f32(x, 0, h, t, seq);
            const float * Bs  = at_f32(B, 0, g, t, seq);
            const float * Cs  = at_f32(C, 0, g, t, seq);
            const float   dts = softplus(*at_f32(dt, h, t, seq));
            float *       y   = y_base + ((seq * n_tok + t) * n_head + h) * head_dim;
            const float   dA  = mamba1 ? 0.0f : std::exp(dts * A_data[h]);
            if (mamba1) {
                const float * Ah = A_data + h * d_state;
                for (int64_t j = 0; j < d_state; ++j) {
                    decay[j] = std::exp(dts * Ah[j]);
                }
            }
            // Row i: row = row decay + B x_i dt, y_i = row . C.
            for (int64_t i = 0; i < head_dim; ++i) {
                y[i] = kt.decay_dot_f32(d_state, (t == 0 ? from : st) + i * d_state, st + i * d_state, decay, dA, Bs, xs[i] * dts, nullptr, 0.0f, Cs);
            }
            // Snapshot slot k holds the state k tokens before the last.
            const int64_t slot = n_tok - 1 - t;
            if (slot > 0 && slot < K) {
                std::memcpy(s_base + ((slot * n_seqs + seq) * n_head + h) * head_state, st,
                            size_t(head_state) * sizeof(float));
            }
        }
    }
}

} // namespace

void add_ssm_kernels(OpKernels & t) {
    t[GGML_OP_SSM_CONV] = {compute_ssm_conv, ssm_conv_fits, nullptr};
    t[GGML_OP_SSM_SCAN] = {compute_ssm_scan, ssm_scan_fits, work_size_ssm_scan};
}

} // namespace loom::cpu
