// Element-wise unary functions: SQR, SQRT, LOG, SIN, COS, SCALE, the
// GGML_OP_UNARY family and the gated linear units (GGML_OP_GLU). Values are
// computed in float whatever the storage type, one dst row per thread.

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"

namespace loom::cpu {
namespace {

enum class Fn {
    sqr,
    sqrt,
    log,
    sin,
    cos,
    scale,
    abs,
    sgn,
    neg,
    step,
    tanh,
    elu,
    relu,
    sigmoid,
    gelu,
    gelu_quick,
    gelu_erf,
    silu,
    hardswish,
    hardsigmoid,
    exp,
    expm1,
    softplus,
    xielu,
    floor,
    ceil,
    round,
    trunc,
    invalid,
};

struct UnaryFn {
    Fn    fn = Fn::invalid;
    float s  = 1.0f; // SCALE: y = x * s + b
    float b  = 0.0f;
    // XIELU: alpha_n, alpha_p, beta, eps as ggml_xielu stores them
    float xp[4] = {};
};

Fn from_unary_op(int32_t u) {
    if (unary_info(u) == nullptr) {
        return Fn::invalid;
    }
    switch (ggml_unary_op(u)) {
        case GGML_UNARY_OP_ABS: return Fn::abs;
        case GGML_UNARY_OP_SGN: return Fn::sgn;
        case GGML_UNARY_OP_NEG: return Fn::neg;
        case GGML_UNARY_OP_STEP: return Fn::step;
        case GGML_UNARY_OP_TANH: return Fn::tanh;
        case GGML_UNARY_OP_ELU: return Fn::elu;
        case GGML_UNARY_OP_RELU: return Fn::relu;
        case GGML_UNARY_OP_SIGMOID: return Fn::sigmoid;
        case GGML_UNARY_OP_GELU: return Fn::gelu;
        case GGML_UNARY_OP_GELU_QUICK: return Fn::gelu_quick;
        case GGML_UNARY_OP_SILU: return Fn::silu;
        case GGML_UNARY_OP_HARDSWISH: return Fn::hardswish;
        case GGML_UNARY_OP_HARDSIGMOID: return Fn::hardsigmoid;
        case GGML_UNARY_OP_EXP: return Fn::exp;
        case GGML_UNARY_OP_EXPM1: return Fn::expm1;
        case GGML_UNARY_OP_SOFTPLUS: return Fn::softplus;
        case GGML_UNARY_OP_GELU_ERF: return Fn::gelu_erf;
        case GGML_UNARY_OP_XIELU: return Fn::xielu;
        case GGML_UNARY_OP_FLOOR: return Fn::floor;
        case GGML_UNARY_OP_CEIL: return Fn::ceil;
        case GGML_UNARY_OP_ROUND: return Fn::round;
        case GGML_UNARY_OP_TRUNC: return Fn::trunc;
        case GGML_UNARY_OP_COUNT: return Fn::invalid;
    }
    return Fn::invalid;
}

// What an operator's op_params make of the element function: one decoder
// per operator of the family.
using Decoder = UnaryFn (*)(const ggml_tensor * dst);

template <Fn fn>
UnaryFn decode_plain(const ggml_tensor *) {
    UnaryFn f;
    f.fn = fn;
    return f;
}

UnaryFn decode_scale(const ggml_tensor * dst) {
    UnaryFn f;
    f.fn = Fn::scale;
    f.s  = op_param_f32(dst, 0);
    f.b  = op_param_f32(dst, 1);
    return f;
}

UnaryFn decode_unary(const ggml_tensor * dst) {
    UnaryFn f;
    f.fn = from_unary_op(op_param_i32(dst, 0));
    for (int i = 0; i < 4; ++i) f.xp[i] = op_param_f32(dst, 1 + i);
    return f;
}

inline float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}

// sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

template <typename F>
inline void map(const float * x, float * y, int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = f(x[i]);
    }
}

// y may alias x exactly (in-place); every element is read before written.
// The switch sits outside the element loops so each loop can vectorise.
void apply(const KernelTable & kt, const UnaryFn & f, const float * x, float * y, int64_t n) {
    switch (f.fn) {
        case Fn::sqr: map(x, y, n, [](float v) { return v * v; }); break;
        case Fn::sqrt: map(x, y, n, [](float v) { return std::sqrt(v); }); break;
        case Fn::log: map(x, y, n, [](float v) { return std::log(v); }); break;
        case Fn::sin: map(x, y, n, [](float v) { return std::sin(v); }); break;
        case Fn::cos: map(x, y, n, [](float v) { return std::cos(v); }); break;
        case Fn::scale: {
            const float s = f.s, b = f.b;
            map(x, y, n, [s, b](float v) { return v * s + b; });
            break;
        }
        case Fn::abs: map(x, y, n, [](float v) { return std::fabs(v); }); break;
        case Fn::sgn: map(x, y, n, [](float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f); }); break;
        case Fn::neg: map(x, y, n, [](float v) { return -v; }); break;
        case Fn::step: map(x, y, n, [](float v) { return v > 0.0f ? 1.0f : 0.0f; }); break;
        case Fn::tanh: map(x, y, n, [](float v) { return std::tanh(v); }); break;
        case Fn::elu: map(x, y, n, [](float v) { return v > 0.0f ? v : std::expm1(v); }); break;
        case Fn::relu: map(x, y, n, [](float v) { return v > 0.0f ? v : 0.0f; }); break;
        case Fn::sigmoid: map(x, y, n, [](float v) { return sigmoid(v); }); break;
        case Fn::gelu:
            map(x, y, n, [](float v) {
                return 0.5f * v * (1.0f + std::tanh(kGeluScale * v * (1.0f + kGeluCubic * v * v)));
            });
            break;
        case Fn::gelu_quick: map(x, y, n, [](float v) { return v * sigmoid(1.702f * v); }); break;
        case Fn::gelu_erf:
            map(x, y, n, [](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
            break;
        case Fn::silu: kt.silu_f32(n, x, y); break;
        case Fn::hardswish:
            map(x, y, n, [](float v) { return v * std::min(1.0f, std::max(0.0f, (v + 3.0f) / 6.0f)); });
            break;
        case Fn::hardsigmoid:
            map(x, y, n, [](float v) { return std::min(1.0f, std::max(0.0f, (v + 3.0f) / 6.0f)); });
            break;
        case Fn::exp: map(x, y, n, [](float v) { return std::exp(v); }); break;
        // exp(x) - 1 as ggml computes it (not std::expm1), so results match.
        case Fn::expm1: map(x, y, n, [](float v) { return std::exp(v) - 1.0f; }); break;
        case Fn::softplus: map(x, y, n, [](float v) { return v > 20.0f ? v : std::log(1.0f + std::exp(v)); }); break;
        case Fn::xielu: {
            const float an = f.xp[0], ap = f.xp[1], beta = f.xp[2], eps = f.xp[3];
            map(x, y, n, [=](float v) {
                return v > 0.0f ? ap * v * v + beta * v : (std::expm1(std::min(v, eps)) - v) * an + beta * v;
            });
            break;
        }
        case Fn::floor: map(x, y, n, [](float v) { return std::floor(v); }); break;
        case Fn::ceil: map(x, y, n, [](float v) { return std::ceil(v); }); break;
        case Fn::round: map(x, y, n, [](float v) { return std::round(v); }); break;
        case Fn::trunc: map(x, y, n, [](float v) { return std::trunc(v); }); break;
        case Fn::invalid: LOOM_ASSERT(false && "unary kernel called for an unsupported op"); break;
    }
}

// Values converted per step when the data is not unit-stride f32.
constexpr int64_t kChunk = 256;

template <Decoder decode>
void compute_unary(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
    const ggml_tensor * src = dst->src[0];
    const UnaryFn       f   = decode(dst);
    LOOM_ASSERT(f.fn != Fn::invalid);

    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const bool    f32_unit = src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 &&
                          ((src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float)) || ne0 == 1);

    const KernelTable & kt    = kernels(p.use_ref);
    const int64_t       nrows = ne1 * ne2 * dst->ne[3];
    const Range         rr    = split_range(nrows, p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const int64_t i1 = ir % ne1;
        const int64_t i2 = (ir / ne1) % ne2;
        const int64_t i3 = ir / (ne1 * ne2);
        const char *  x  = static_cast<const char *>(src->data) + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
        char *        y  = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (f32_unit) {
            apply(kt, f, reinterpret_cast<const float *>(x), reinterpret_cast<float *>(y), ne0);
            continue;
        }
        float buf[kChunk];
        for (int64_t j0 = 0; j0 < ne0; j0 += kChunk) {
            const int64_t n = std::min(kChunk, ne0 - j0);
            load_floats(src->type, x + size_t(j0) * src->nb[0], src->nb[0], n, buf);
            apply(kt, f, buf, buf, n);
            store_floats(dst->type, buf, y + size_t(j0) * dst->nb[0], dst->nb[0], n);
        }
    }
}

// ---- gated linear units ----

Fn glu_activation(int32_t op) {
    if (glu_info(op) == nullptr) {
        return Fn::invalid;
    }
    switch (ggml_glu_op(op)) {
        case GGML_GLU_OP_REGLU: return Fn::relu;
        case GGML_GLU_OP_GEGLU: return Fn::gelu;
        case GGML_GLU_OP_SWIGLU: return Fn::silu;
        case GGML_GLU_OP_GEGLU_ERF: return Fn::gelu_erf;
        case GGML_GLU_OP_GEGLU_QUICK: return Fn::gelu_quick;
        case GGML_GLU_OP_SWIGLU_OAI:   // a loop of its own
        case GGML_GLU_OP_SWIGLU_CLAMP: // a loop of its own
        case GGML_GLU_OP_COUNT: return Fn::invalid;
    }
    return Fn::invalid;
}

void compute_glu(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
    const ggml_tensor * a       = dst->src[0];
    const ggml_tensor * b       = dst->src[1];
    const int32_t       op      = op_param_i32(dst, 0);
    const bool          swapped = op_param_i32(dst, 1) != 0;
    const float         alpha   = op_param_f32(dst, 2);
    const float         limit   = op_param_f32(dst, 3);
    const UnaryFn       act{glu_activation(op)};
    LOOM_ASSERT(act.fn != Fn::invalid || op == GGML_GLU_OP_SWIGLU_OAI || op == GGML_GLU_OP_SWIGLU_CLAMP);

    const KernelTable & kt   = kernels(p.use_ref);
    const int64_t       nc   = dst->ne[0];
    const size_t        ta   = ggml_type_size(a->type);
    const int64_t       ne1  = dst->ne[1], ne2 = dst->ne[2];
    const Range         rows = split_range(ne1 * ne2 * dst->ne[3], p.ith, p.nth);
    for (int64_t ir = rows.begin; ir < rows.end; ++ir) {
        const int64_t i1 = ir % ne1;
        const int64_t i2 = (ir / ne1) % ne2;
        const int64_t i3 = ir / (ne1 * ne2);
        const char *  ra = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        // x is activated, g gates it: two inputs, or two halves of a's row.
        const char * x = ra;
        const char * g = nullptr;
        if (b != nullptr) {
            g = static_cast<const char *>(b->data) + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
        } else {
            x = ra + (swapped ? size_t(nc) * ta : 0);
            g = ra + (swapped ? 0 : size_t(nc) * ta);
        }
        char * y = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        float  xv[kChunk], gv[kChunk];
        for (int64_t j0 = 0; j0 < nc; j0 += kChunk) {
            const int64_t n = std::min(kChunk, nc - j0);
            load_floats(a->type, x + size_t(j0) * ta, ta, n, xv);
            load_floats(a->type, g + size_t(j0) * ta, ta, n, gv);
            if (op == GGML_GLU_OP_SWIGLU_OAI) {
                for (int64_t j = 0; j < n; ++j) {
                    const float xc = std::min(xv[j], limit);
                    const float gc = std::clamp(gv[j], -limit, limit);
                    xv[j]          = xc / (1.0f + std::exp(-alpha * xc)) * (gc + 1.0f);
                }
            } else if (op == GGML_GLU_OP_SWIGLU_CLAMP) {
                for (int64_t j = 0; j < n; ++j) {
                    const float xc = std::min(xv[j], limit);
                    xv[j]          = xc / (1.0f + std::exp(-xc)) * std::clamp(gv[j], -limit, limit);
                }
            } else {
                apply(kt, act, xv, xv, n);
                for (int64_t j = 0; j < n; ++j) xv[j] *= gv[j];
            }
            store_floats(dst->type, xv, y + size_t(j0) * dst->nb[0], dst->nb[0], n);
        }
    }
}

bool supports_glu(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    if (a == nullptr || (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) ||
        a->nb[0] != ggml_type_size(a->type) || op->nb[0] != ggml_type_size(op->type)) {
        return false;
    }
    return b == nullptr || b->nb[0] == ggml_type_size(b->type);
}

template <Decoder decode>
bool supports_unary(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr || decode(op).fn == Fn::invalid) {
        return false;
    }
    return is_float_type(src->type);
}

template <Decoder decode>
constexpr OpKernel unary_kernel{compute_unary<decode>, supports_unary<decode>, nullptr};

} // namespace

void add_unary_kernels(OpKernels & t) {
    t[GGML_OP_SQR]   = unary_kernel<decode_plain<Fn::sqr>>;
    t[GGML_OP_SQRT]  = unary_kernel<decode_plain<Fn::sqrt>>;
    t[GGML_OP_LOG]   = unary_kernel<decode_plain<Fn::log>>;
    t[GGML_OP_SIN]   = unary_kernel<decode_plain<Fn::sin>>;
    t[GGML_OP_COS]   = unary_kernel<decode_plain<Fn::cos>>;
    t[GGML_OP_SCALE] = unary_kernel<decode_scale>;
    t[GGML_OP_UNARY] = unary_kernel<decode_unary>;
    t[GGML_OP_GLU]   = {compute_glu, supports_glu, nullptr};
}

} // namespace loom::cpu
