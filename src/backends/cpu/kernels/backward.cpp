// Gradients of forward ops: GGML_OP_SILU_BACK (F32, F16), RMS_NORM_BACK,
// SOFT_MAX_BACK, GET_ROWS_BACK (F32 or F16 gradient), POOL_2D_BACK and
// IM2COL_BACK (F32). ROPE_BACK is the rope kernel's (rope.cpp).
//
// Each thread owns whole rows (or planes, or channels) of the result, and
// every result element is computed by one thread in a fixed order, so the
// result does not depend on the thread count.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "element_at.h"
#include "kernels.h"

namespace loom::cpu {

namespace {

bool rows_of(const ggml_tensor * t, ggml_type type) {
    return t != nullptr && t->type == type && t->nb[0] == ggml_type_size(type);
}

template <typename T>
const T * row_of(const ggml_tensor * t, int64_t ir) {
    const RowPos rp = row_pos(ir, t->ne);
    return reinterpret_cast<const T *>(element_at(t, 0, rp.i1, rp.i2, rp.i3));
}
template <typename T>
T * row_of(ggml_tensor * t, int64_t ir) {
    const RowPos rp = row_pos(ir, t->ne);
    return reinterpret_cast<T *>(element_at(t, 0, rp.i1, rp.i2, rp.i3));
}

// ---- SILU_BACK: dx = dy * s (1 + x (1 - s)), s = sigmoid(x) ----

float silu_grad(float dy, float x) {
    const float s = 1.0f / (1.0f + std::exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}

void compute_silu_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * dy = dst->src[0];
    const ggml_tensor * x  = dst->src[1];
    const int64_t       n  = dst->ne[0];
    const Range         r  = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        if (dst->type == GGML_TYPE_F32) {
            const float * g  = row_of<float>(dy, ir);
            const float * xr = row_of<float>(x, ir);
            float *       d  = row_of<float>(dst, ir);
            for (int64_t i = 0; i < n; ++i) {
                d[i] = silu_grad(g[i], xr[i]);
            }
        } else {
            const uint16_t * g  = row_of<uint16_t>(dy, ir);
            const uint16_t * xr = row_of<uint16_t>(x, ir);
            uint16_t *       d  = row_of<uint16_t>(dst, ir);
            for (int64_t i = 0; i < n; ++i) {
                d[i] = fp32_to_fp16(silu_grad(fp16_to_fp32(g[i]), fp16_to_fp32(xr[i])));
            }
        }
    }
}

// The shapes are the operators' rules (Note [Shape rules] in core/fits.h);
// here the types and row layouts the kernels take.
bool supports_silu_back(const ggml_tensor * op) {
    const ggml_type t = op->type;
    return rows_of(op, t) && rows_of(op->src[0], t) && rows_of(op->src[1], t);
}

// ---- RMS_NORM_BACK ----
// y = x / rms(x), rms = sqrt(mean(x^2) + eps):
// dx = (dy - x * dot(x, dy) / (sum(x^2) + n eps)) / rms

void compute_rms_norm_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * dy  = dst->src[0];
    const ggml_tensor * x   = dst->src[1];
    const float         eps = op_param_f32(dst, 0);
    const int64_t       n   = dst->ne[0];
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const float * g  = row_of<float>(dy, ir);
        const float * xr = row_of<float>(x, ir);
        float *       d  = row_of<float>(dst, ir);
        double        xx = 0.0, xg = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            xx += double(xr[i]) * double(xr[i]);
            xg += double(xr[i]) * double(g[i]);
        }
        const double rrms    = 1.0 / std::sqrt(xx / double(n) + double(eps));
        const double scale_x = -xg / (xx + double(eps) * double(n));
        for (int64_t i = 0; i < n; ++i) {
            d[i] = float((double(g[i]) + double(xr[i]) * scale_x) * rrms);
        }
    }
}

// ---- SOFT_MAX_BACK: dx = scale * y * (dy - dot(y, dy)) per row ----

void compute_soft_max_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * dy    = dst->src[0];
    const ggml_tensor * y     = dst->src[1];
    const float         scale = op_param_f32(dst, 0);
    const int64_t       n     = dst->ne[0];
    const Range         r     = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const float * g  = row_of<float>(dy, ir);
        const float * yr = row_of<float>(y, ir);
        float *       d  = row_of<float>(dst, ir);
        double        dot = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            dot += double(yr[i]) * double(g[i]);
        }
        // d may be g (the inplace variant): each element reads its own g first.
        for (int64_t i = 0; i < n; ++i) {
            d[i] = float(double(scale) * double(yr[i]) * (double(g[i]) - dot));
        }
    }
}

bool supports_f32_pair(const ggml_tensor * op) {
    return rows_of(op, GGML_TYPE_F32) && rows_of(op->src[0], GGML_TYPE_F32) && rows_of(op->src[1], GGML_TYPE_F32);
}

bool supports_soft_max_back(const ggml_tensor * op) {
    return supports_f32_pair(op) && op_param_f32(op, 1) == 0.0f; // max_bias
}

// ---- GET_ROWS_BACK: dst row r = sum of the gradient rows whose index is r ----
// Gradient rows past the last index take no part. The indices are inside
// dst's rows (checked before the kernel, Note [Index sources] in
// core/op_table.h).

void compute_get_rows_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * idx  = dst->src[1];
    const int64_t       nc   = dst->ne[0];
    const int64_t       n1   = dst->ne[1];
    const int64_t       k    = idx->ne[0];
    const Range         r    = split_range(n1, p.ith, p.nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        std::memset(element_at(dst, 0, i, 0, 0), 0, size_t(nc) * sizeof(float));
    }
    for (int64_t j = 0; j < k; ++j) {
        int32_t row;
        std::memcpy(&row, element_at(idx, j, 0, 0, 0), sizeof(row));
        if (row < r.begin || row >= r.end) {
            continue;
        }
        auto * d = reinterpret_cast<float *>(element_at(dst, 0, row, 0, 0));
        if (grad->type == GGML_TYPE_F32) {
            const auto * g = reinterpret_cast<const float *>(element_at(grad, 0, j, 0, 0));
            for (int64_t i = 0; i < nc; ++i) {
                d[i] += g[i];
            }
        } else {
            const auto * g = reinterpret_cast<const uint16_t *>(element_at(grad, 0, j, 0, 0));
            for (int64_t i = 0; i < nc; ++i) {
                d[i] += fp16_to_fp32(g[i]);
            }
        }
    }
}

bool supports_get_rows_back(const ggml_tensor * op) {
    const ggml_tensor * grad = op->src[0];
    return (rows_of(grad, GGML_TYPE_F32) || rows_of(grad, GGML_TYPE_F16)) && rows_of(op, GGML_TYPE_F32);
}

// ---- POOL_2D_BACK ----
// The gradient of output (ox, oy) of a plane goes to the window's first
// largest input (MAX) or, divided by k0 k1, to each input of the window
// inside the plane (AVG). Threads take whole planes.

void compute_pool_2d_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * fwd  = dst->src[1];
    const int           op   = op_param_i32(dst, 0);
    const int           k0 = op_param_i32(dst, 1), k1 = op_param_i32(dst, 2);
    const int           s0 = op_param_i32(dst, 3), s1 = op_param_i32(dst, 4);
    const int           p0 = op_param_i32(dst, 5), p1 = op_param_i32(dst, 6);
    const int64_t       w = dst->ne[0], h = dst->ne[1];
    const int64_t       ow = grad->ne[0], oh = grad->ne[1];
    const int64_t       planes = dst->ne[2] * dst->ne[3];
    const Range         r      = split_range(planes, p.ith, p.nth);
    for (int64_t pl = r.begin; pl < r.end; ++pl) {
        const int64_t i2 = pl % dst->ne[2], i3 = pl / dst->ne[2];
        auto at = [&](ggml_tensor * t, int64_t x, int64_t y) {
            return reinterpret_cast<float *>(element_at(t, x, y, i2, i3));
        };
        auto in = [&](const ggml_tensor * t, int64_t x, int64_t y) {
            return *reinterpret_cast<const float *>(element_at(t, x, y, i2, i3));
        };
        for (int64_t y = 0; y < h; ++y) {
            for (int64_t x = 0; x < w; ++x) {
                *at(dst, x, y) = 0.0f;
            }
        }
        for (int64_t oy = 0; oy < oh; ++oy) {
            for (int64_t ox = 0; ox < ow; ++ox) {
                const float   g  = in(grad, ox, oy);
                const int64_t ix = ox * s0 - p0, iy = oy * s1 - p1;
                // The window's taps inside the plane, in the order of the
                // whole window (a window may be far larger than the plane).
                const int64_t kx0 = std::max<int64_t>(0, -ix), kx1 = std::min<int64_t>(k0, w - ix);
                const int64_t ky0 = std::max<int64_t>(0, -iy), ky1 = std::min<int64_t>(k1, h - iy);
                if (op == GGML_OP_POOL_MAX) {
                    float   best = -FLT_MAX;
                    int64_t bx = -1, by = -1;
                    for (int64_t ky = ky0; ky < ky1; ++ky) {
                        for (int64_t kx = kx0; kx < kx1; ++kx) {
                            const int64_t x = ix + kx, y = iy + ky;
                            const float   v = in(fwd, x, y);
                            if (v > best) {
                                best = v;
                                bx   = x;
                                by   = y;
                            }
                        }
                    }
                    if (bx >= 0) {
                        *at(dst, bx, by) += g;
                    }
                } else {
                    const float share = g / float(int64_t(k0) * k1);
                    for (int64_t ky = ky0; ky < ky1; ++ky) {
                        for (int64_t kx = kx0; kx < kx1; ++kx) {
                            *at(dst, ix + kx, iy + ky) += share;
                        }
                    }
                }
            }
        }
    }
}

bool supports_pool_2d_back(const ggml_tensor * op) {
    return rows_of(op->src[0], GGML_TYPE_F32) && rows_of(op->src[1], GGML_TYPE_F32) && rows_of(op, GGML_TYPE_F32);
}

// ---- IM2COL_BACK ----
// Input element (x, y) of channel c gets, from every output position
// (ow, oh) whose window covers it at kernel tap (kx, ky), the gradient of
// column entry [c, ky, kx] of that position. Threads take (batch, channel)
// planes.

struct Im2colBackGeometry {
    int64_t n, ic, ih, iw, kh, kw, oh, ow;
    int     s0, s1, p0, p1, d0, d1;
    bool    two_d;
};

Im2colBackGeometry im2col_back_geometry(const ggml_tensor * op) {
    const ggml_tensor * grad  = op->src[0];
    const ggml_tensor * kern  = op->src[1];
    const bool          two_d = op_param_i32(op, 6) == 1;
    return {two_d ? op->ne[3] : op->ne[2],
            two_d ? op->ne[2] : op->ne[1],
            two_d ? op->ne[1] : 1,
            op->ne[0],
            two_d ? kern->ne[1] : 1,
            kern->ne[0],
            two_d ? grad->ne[2] : 1,
            grad->ne[1],
            op_param_i32(op, 0),
            op_param_i32(op, 1),
            op_param_i32(op, 2),
            op_param_i32(op, 3),
            op_param_i32(op, 4),
            op_param_i32(op, 5),
            two_d};
}

void compute_im2col_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor *      grad = dst->src[0];
    const Im2colBackGeometry g    = im2col_back_geometry(dst);
    const int64_t            taps = g.kh * g.kw;
    const Range              r    = split_range(g.n * g.ic, p.ith, p.nth);
    for (int64_t plane = r.begin; plane < r.end; ++plane) {
        const int64_t in = plane / g.ic, c = plane % g.ic;
        for (int64_t y = 0; y < g.ih; ++y) {
            for (int64_t x = 0; x < g.iw; ++x) {
                float sum = 0.0f;
                for (int64_t ky = 0; ky < g.kh; ++ky) {
                    const int64_t ty = y + g.p1 - ky * g.d1;
                    if (g.two_d && (ty < 0 || ty % g.s1 != 0 || ty / g.s1 >= g.oh)) {
                        continue;
                    }
                    const int64_t oy = g.two_d ? ty / g.s1 : 0;
                    for (int64_t kx = 0; kx < g.kw; ++kx) {
                        const int64_t tx = x + g.p0 - kx * g.d0;
                        if (tx < 0 || tx % g.s0 != 0 || tx / g.s0 >= g.ow) {
                            continue;
                        }
                        const int64_t ox  = tx / g.s0;
                        const int64_t col = c * taps + ky * g.kw + kx;
                        const char *  src =
                            g.two_d ? element_at(grad, col, ox, oy, in) : element_at(grad, col, ox, in, 0);
                        sum += *reinterpret_cast<const float *>(src);
                    }
                }
                char * out = g.two_d ? element_at(dst, x, y, c, in) : element_at(dst, x, c, in, 0);
                *reinterpret_cast<float *>(out) = sum;
            }
        }
    }
}

bool supports_im2col_back(const ggml_tensor * op) {
    return rows_of(op->src[0], GGML_TYPE_F32) && rows_of(op, GGML_TYPE_F32);
}

} // namespace

void add_backward_kernels(OpKernels & t) {
    t[GGML_OP_SILU_BACK]     = {compute_silu_back, supports_silu_back, nullptr};
    t[GGML_OP_RMS_NORM_BACK] = {compute_rms_norm_back, supports_f32_pair, nullptr};
    t[GGML_OP_SOFT_MAX_BACK] = {compute_soft_max_back, supports_soft_max_back, nullptr};
    t[GGML_OP_GET_ROWS_BACK] = {compute_get_rows_back, supports_get_rows_back, nullptr};
    t[GGML_OP_POOL_2D_BACK]  = {compute_pool_2d_back, supports_pool_2d_back, nullptr};
    t[GGML_OP_IM2COL_BACK]   = {compute_im2col_back, supports_im2col_back, nullptr};
}

} // namespace loom::cpu
