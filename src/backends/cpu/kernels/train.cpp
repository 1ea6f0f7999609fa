// The loss and the optimizer steps: GGML_OP_CROSS_ENTROPY_LOSS,
// CROSS_ENTROPY_LOSS_BACK, OPT_STEP_ADAMW, OPT_STEP_SGD (F32).
//
// The loss is a sum over rows: each row's term goes to its slot of the
// scratch (one double per row) and thread 0 adds the slots in row order
// after a barrier, so the result does not depend on the thread count. The
// optimizer steps update their parameter (and moments) in place, one row
// per thread share; the node is a view of the parameter, and where a copy
// of the graph gave it memory of its own it receives the new values too.

#include <cmath>
#include <cstring>

#include "core/common.h"
#include "element_at.h"
#include "kernels.h"
#include "backends/cpu/simd/kernel_table.h"

namespace loom::cpu {

namespace {

bool f32_rows(const ggml_tensor * t) {
    return t != nullptr && t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float);
}

const float * row_of(const ggml_tensor * t, int64_t ir) {
    const RowPos rp = row_pos(ir, t->ne);
    return reinterpret_cast<const float *>(element_at(t, 0, rp.i1, rp.i2, rp.i3));
}
float * row_of(ggml_tensor * t, int64_t ir) {
    const RowPos rp = row_pos(ir, t->ne);
    return reinterpret_cast<float *>(element_at(t, 0, rp.i1, rp.i2, rp.i3));
}

// log(sum(exp(x - max))) and max of a row, in double.
struct LogSumExp {
    double max;
    double log_sum;
};
LogSumExp log_sum_exp(const float * x, int64_t n) {
    // The largest value, NaNs passed over (as fmax; a comparison instead of
    // fmax, whose vectorized reduction GCC 12 cannot compile for 64-bit Arm).
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        const double v = double(x[i]);
        mx             = v > mx ? v : mx;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += std::exp(double(x[i]) - mx);
    }
    return {mx, std::log(sum)};
}

// loss = -1/rows * sum_rows sum_i labels_i * log_softmax(logits)_i
void compute_cross_entropy_loss(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * logits = dst->src[0];
    const ggml_tensor * labels = dst->src[1];
    const int64_t       nc     = logits->ne[0];
    const int64_t       nr     = ggml_nrows(logits);
    LOOM_ASSERT(p.wsize >= size_t(nr) * sizeof(double));
    double * terms = static_cast<double *>(p.wdata);

    const Range r = split_range(nr, p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const float *   x   = row_of(logits, ir);
        const float *   y   = row_of(labels, ir);
        const LogSumExp lse = log_sum_exp(x, nc);
        double          sum = 0.0;
        for (int64_t i = 0; i < nc; ++i) {
            sum += double(y[i]) * (double(x[i]) - lse.max - lse.log_sum);
        }
        terms[ir] = sum;
    }
    p.sync();
    if (p.ith == 0) {
        double total = 0.0;
        for (int64_t ir = 0; ir < nr; ++ir) {
            total += terms[ir];
        }
        *static_cast<float *>(dst->data) = float(-total / double(nr));
    }
}

// d logits = (softmax(logits) - labels) * d loss / rows
void compute_cross_entropy_loss_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * grad   = dst->src[0];
    const ggml_tensor * logits = dst->src[1];
    const ggml_tensor * labels = dst->src[2];
    const int64_t       nc     = logits->ne[0];
    const int64_t       nr     = ggml_nrows(logits);
    float               g;
    std::memcpy(&g, grad->data, sizeof(g));
    const double scale = double(g) / double(nr);

    const Range r = split_range(nr, p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const float *   x   = row_of(logits, ir);
        const float *   y   = row_of(labels, ir);
        float *         dx  = row_of(dst, ir);
        const LogSumExp lse = log_sum_exp(x, nc);
        for (int64_t i = 0; i < nc; ++i) {
            const double softmax = std::exp(double(x[i]) - lse.max - lse.log_sum);
            dx[i]                = float((softmax - double(y[i])) * scale);
        }
    }
}

bool supports_cross_entropy_loss(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    return f32_rows(a) && f32_rows(b);
}

bool supports_cross_entropy_loss_back(const ggml_tensor * op) {
    const ggml_tensor * g = op->src[0];
    const ggml_tensor * a = op->src[1];
    const ggml_tensor * b = op->src[2];
    return g != nullptr && f32_rows(a) && f32_rows(b) && f32_rows(op);
}

size_t work_size_cross_entropy_loss(const ggml_tensor * op, int /*n_threads*/) {
    return size_t(ggml_nrows(op->src[0])) * sizeof(double);
}

float param_at(const ggml_tensor * params, int i) {
    float v;
    std::memcpy(&v, static_cast<const char *>(params->data) + size_t(i) * params->nb[0], sizeof(v));
    return v;
}

// m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
// w = w (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps)
void compute_opt_step_adamw(const ComputeParams & p, ggml_tensor * dst) {
    ggml_tensor *       w      = dst->src[0];
    const ggml_tensor * grad   = dst->src[1];
    ggml_tensor *       m      = dst->src[2];
    ggml_tensor *       v      = dst->src[3];
    const ggml_tensor * params = dst->src[4];
    const float         alpha  = param_at(params, 0);
    const float         beta1  = param_at(params, 1);
    const float         beta2  = param_at(params, 2);
    const float         eps    = param_at(params, 3);
    const float         wd     = param_at(params, 4);
    const float         beta1h = param_at(params, 5);
    const float         beta2h = param_at(params, 6);
    const float         keep   = 1.0f - alpha * wd;

    const AdamwStep   step{beta1, beta2, 1.0f - beta1, 1.0f - beta2, beta1h, beta2h, eps, alpha, keep};
    const AdamwRowFn  adamw = kernels(p.use_ref).adamw_f32;
    const int64_t     n     = w->ne[0];
    const Range       r     = split_range(ggml_nrows(w), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        adamw(n, row_of(w, ir), row_of(grad, ir), row_of(m, ir), row_of(v, ir), step);
        if (dst->data != w->data) {
            std::memcpy(row_of(dst, ir), row_of(w, ir), size_t(n) * sizeof(float));
        }
    }
}

// w = w (1 - alpha wd) - alpha g
void compute_opt_step_sgd(const ComputeParams & p, ggml_tensor * dst) {
    ggml_tensor *       w      = dst->src[0];
    const ggml_tensor * grad   = dst->src[1];
    const ggml_tensor * params = dst->src[2];
    const float         alpha  = param_at(params, 0);
    const float         keep   = 1.0f - alpha * param_at(params, 1);

    const int64_t n = w->ne[0];
    const Range   r = split_range(ggml_nrows(w), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        float *       wr = row_of(w, ir);
        const float * gr = row_of(grad, ir);
        float * out = dst->data != w->data ? row_of(dst, ir) : nullptr;
        for (int64_t i = 0; i < n; ++i) {
            wr[i] = wr[i] * keep - alpha * gr[i];
            if (out != nullptr) {
                out[i] = wr[i];
            }
        }
    }
}

// OPT_STEP_ADAMW (adamw) and OPT_STEP_SGD.
template <bool adamw>
bool supports_opt_step(const ggml_tensor * op) {
    const ggml_tensor * w       = op->src[0];
    const int           n_state = adamw ? 3 : 1; // grad (, m, v)
    const ggml_tensor * params  = op->src[n_state + 1];
    if (!f32_rows(w) || !f32_rows(op) || !ggml_are_same_shape(op, w) || params == nullptr ||
        params->type != GGML_TYPE_F32 || ggml_nelements(params) != (adamw ? 7 : 2)) {
        return false;
    }
    for (int i = 1; i <= n_state; ++i) {
        if (!f32_rows(op->src[i]) || !ggml_are_same_shape(op->src[i], w)) {
            return false;
        }
    }
    return true;
}

} // namespace

void add_train_kernels(OpKernels & t) {
    t[GGML_OP_CROSS_ENTROPY_LOSS] = {compute_cross_entropy_loss, supports_cross_entropy_loss,
                                     work_size_cross_entropy_loss};
    t[GGML_OP_CROSS_ENTROPY_LOSS_BACK] = {compute_cross_entropy_loss_back, supports_cross_entropy_loss_back, nullptr};
    t[GGML_OP_OPT_STEP_ADAMW]          = {compute_opt_step_adamw, supports_opt_step<true>, nullptr};
    t[GGML_OP_OPT_STEP_SGD]            = {compute_opt_step_sgd, supports_opt_step<false>, nullptr};
}

} // namespace loom::cpu
