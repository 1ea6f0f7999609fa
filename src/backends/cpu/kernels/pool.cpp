// Pooling (POOL_1D, POOL_2D), resampling (UPSCALE) and the window and
// relative-position operators of SAM's image encoder (WIN_PART, WIN_UNPART,
// GET_REL_POS, ADD_REL_POS).
//
// Sources are read through their strides. Each output row is computed by one
// thread; the resampling positions are computed in float as ggml computes
// them, so the same source samples are chosen.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/pool.h"
#include "core/common.h"

namespace loom::cpu {
namespace {

const char * cdata(const ggml_tensor * t) {
    return static_cast<const char *>(t->data);
}
char * mdata(ggml_tensor * t) {
    return static_cast<char *>(t->data);
}
size_t row_offset(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return size_t(i1) * t->nb[1] + size_t(i2) * t->nb[2] + size_t(i3) * t->nb[3];
}

// ---- POOL_1D, POOL_2D ----

struct PoolParams {
    bool    two_d, avg;
    int64_t k0, k1, s0, s1, p0, p1;

    PoolParams(const ggml_tensor * dst, bool pool_2d)
        : two_d(pool_2d), avg(op_param_i32(dst, 0) == GGML_OP_POOL_AVG), k0(op_param_i32(dst, 1)),
          k1(two_d ? op_param_i32(dst, 2) : 1), s0(op_param_i32(dst, two_d ? 3 : 2)),
          s1(two_d ? op_param_i32(dst, 4) : 1), p0(op_param_i32(dst, two_d ? 5 : 3)),
          p1(two_d ? op_param_i32(dst, 6) : 0) {}
};

// The taps [lo, hi) of a window of k starting at `start` that fall inside a
// line of n (empty when the window lies wholly in the padding).
struct Taps {
    int64_t lo, hi;
};
Taps taps(int64_t start, int64_t k, int64_t n) {
    return {std::max<int64_t>(0, -start), std::max<int64_t>(0, std::min<int64_t>(k, n - start))};
}

// Windows that fall entirely into the padding give -FLT_MAX (max) or 0 (1D
// average); 1D averages divide by the samples inside, 2D ones by k0*k1. A
// sample is taken for the maximum when it is greater than the maximum so far
// (NaN never is), and averages add the samples row by row, as ggml does.
void pool_any(const PoolParams & q, const ggml_tensor * src, ggml_tensor * dst, const Range & rr) {
    const int64_t OW = dst->ne[0], OH = dst->ne[1], W = src->ne[0], H = q.two_d ? src->ne[1] : 1;
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t i1 = r % OH, i2 = (r / OH) % dst->ne[2], i3 = r / (OH * dst->ne[2]);
        // 1D: row i1 of the source; 2D: the window rows start at i1*s1 - p1 of plane (i2, i3).
        const char * plane = cdata(src) + row_offset(src, q.two_d ? 0 : i1, i2, i3);
        char *       out   = mdata(dst) + row_offset(dst, i1, i2, i3);
        const int64_t y0   = q.two_d ? i1 * q.s1 - q.p1 : 0;
        const Taps   ty    = taps(y0, q.k1, H);
        for (int64_t ox = 0; ox < OW; ++ox) {
            const int64_t x0  = ox * q.s0 - q.p0;
            const Taps    tx  = taps(x0, q.k0, W);
            float         res = q.avg ? 0.0f : -FLT_MAX;
            // A window with no column inside the line takes no sample from any
            // of its rows (an empty source may still have many rows).
            for (int64_t ky = tx.lo < tx.hi ? ty.lo : ty.hi; ky < ty.hi; ++ky) {
                const char * line = plane + size_t(y0 + ky) * src->nb[1];
                for (int64_t kx = tx.lo; kx < tx.hi; ++kx) {
                    const float v = load_float(src->type, line + size_t(x0 + kx) * src->nb[0]);
                    res           = q.avg ? res + v : (v > res ? v : res);
                }
            }
            if (q.avg) {
                const int64_t count = (ty.hi - ty.lo) * (tx.hi - tx.lo);
                res = q.two_d ? res / float(q.k0 * q.k1) : (count > 0 ? res / float(count) : 0.0f);
            }
            *reinterpret_cast<float *>(out + size_t(ox) * dst->nb[0]) = res;
        }
    }
}

// 2D maximum of an F32 source with contiguous lines: the window's lines are
// first reduced to one line, column by column (a loop the compiler
// vectorizes), whose windows then give the outputs. The result is ggml's:
// the greatest sample, -FLT_MAX when there is none, NaN never taken (only
// which of +0 and -0 wins a tie can differ).
void pool_max_2d_f32(const PoolParams & q, const ggml_tensor * src, ggml_tensor * dst, const Range & rr) {
    const int64_t      OW = dst->ne[0], OH = dst->ne[1], W = src->ne[0], H = src->ne[1];
    std::vector<float> col(static_cast<size_t>(W));
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t i1 = r % OH, i2 = (r / OH) % dst->ne[2], i3 = r / (OH * dst->ne[2]);
        const char *  plane = cdata(src) + row_offset(src, 0, i2, i3);
        float *       out   = reinterpret_cast<float *>(mdata(dst) + row_offset(dst, i1, i2, i3));
        const Taps    ty    = taps(i1 * q.s1 - q.p1, q.k1, H);
        float *       m     = col.data();
        std::fill(m, m + W, -FLT_MAX);
        for (int64_t ky = ty.lo; ky < ty.hi; ++ky) {
            const float * line = reinterpret_cast<const float *>(plane + size_t(i1 * q.s1 - q.p1 + ky) * src->nb[1]);
            for (int64_t x = 0; x < W; ++x) {
                m[x] = line[x] > m[x] ? line[x] : m[x];
            }
        }
        for (int64_t ox = 0; ox < OW; ++ox) {
            const int64_t x0  = ox * q.s0 - q.p0;
            const Taps    tx  = taps(x0, q.k0, W);
            float         res = -FLT_MAX;
            for (int64_t kx = tx.lo; kx < tx.hi; ++kx) {
                res = m[x0 + kx] > res ? m[x0 + kx] : res;
            }
            out[ox] = res;
        }
    }
}

// acc[i] += the k taps at line[i*s], added one after the other; with k and s
// known the compiler vectorizes across i, the order of additions unchanged.
template <int K, int S>
void add_windows(float * acc, const float * line, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float r = acc[i];
        for (int kx = 0; kx < K; ++kx) {
            r += line[i * S + kx];
        }
        acc[i] = r;
    }
}
void add_windows_any(float * acc, const float * line, int64_t n, int64_t k, int64_t s) {
    for (int64_t i = 0; i < n; ++i) {
        float r = acc[i];
        for (int64_t kx = 0; kx < k; ++kx) {
            r += line[i * s + kx];
        }
        acc[i] = r;
    }
}

// 2D average of an F32 source with contiguous lines, in ggml's order of
// additions (line by line of the window, left to right): the outputs whose
// windows lie inside the line are summed a window line at a time across the
// output row; those that reach into the padding one by one.
void pool_avg_2d_f32(const PoolParams & q, const ggml_tensor * src, ggml_tensor * dst, const Range & rr) {
    const int64_t OW = dst->ne[0], OH = dst->ne[1], W = src->ne[0], H = src->ne[1];
    const float   area = float(q.k0 * q.k1);
    // Outputs [in_lo, in_hi) have every tap inside the line.
    const int64_t in_lo = std::min(OW, (q.p0 + q.s0 - 1) / q.s0);
    const int64_t in_hi = W - q.k0 + q.p0 < 0 ? in_lo : std::clamp((W - q.k0 + q.p0) / q.s0 + 1, in_lo, OW);
    const int64_t n_in  = in_hi - in_lo;
    auto          add   = [&](float * acc, const float * from) {
        if (q.k0 == 2 && q.s0 == 2) {
            add_windows<2, 2>(acc, from, n_in);
        } else if (q.k0 == 3 && q.s0 == 3) {
            add_windows<3, 3>(acc, from, n_in);
        } else if (q.k0 == 4 && q.s0 == 4) {
            add_windows<4, 4>(acc, from, n_in);
        } else if (q.k0 == 3 && q.s0 == 2) {
            add_windows<3, 2>(acc, from, n_in);
        } else {
            add_windows_any(acc, from, n_in, q.k0, q.s0);
        }
    };
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t i1 = r % OH, i2 = (r / OH) % dst->ne[2], i3 = r / (OH * dst->ne[2]);
        const char *  plane = cdata(src) + row_offset(src, 0, i2, i3);
        float *       out   = reinterpret_cast<float *>(mdata(dst) + row_offset(dst, i1, i2, i3));
        const Taps    ty    = taps(i1 * q.s1 - q.p1, q.k1, H);
        auto          line  = [&](int64_t ky) {
            return reinterpret_cast<const float *>(plane + size_t(i1 * q.s1 - q.p1 + ky) * src->nb[1]);
        };
        std::fill(out + in_lo, out + in_hi, 0.0f);
        for (int64_t ky = ty.lo; ky < ty.hi && n_in > 0; ++ky) {
            add(out + in_lo, line(ky) + (in_lo * q.s0 - q.p0));
        }
        for (int64_t ox = 0; ox < OW; ++ox) {
            if (ox == in_lo && in_hi > in_lo) {
                ox = in_hi - 1;
                continue;
            }
            const int64_t x0  = ox * q.s0 - q.p0;
            const Taps    tx  = taps(x0, q.k0, W);
            float         res = 0.0f;
            for (int64_t ky = ty.lo; ky < ty.hi; ++ky) {
                const float * l = line(ky);
                for (int64_t kx = tx.lo; kx < tx.hi; ++kx) {
                    res += l[x0 + kx];
                }
            }
            out[ox] = res;
        }
        for (int64_t ox = 0; ox < OW; ++ox) {
            out[ox] = out[ox] / area;
        }
    }
}

// POOL_1D and (two_d) POOL_2D.
template <bool two_d>
void compute_pool(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const PoolParams    q(dst, two_d);
    const Range         rr = split_range(ggml_nrows(dst), p.ith, p.nth);
    // An empty source takes the general walk, whose windows find no sample
    // in O(1) each (the fast ones walk the lines and columns of a window).
    const bool fast = q.two_d && !p.use_ref && ggml_nelements(src) > 0 && src->type == GGML_TYPE_F32 &&
                      src->nb[0] == sizeof(float) && src->nb[1] % sizeof(float) == 0 && dst->nb[0] == sizeof(float);
    if (fast && q.avg) {
        pool_avg_2d_f32(q, src, dst, rr);
    } else if (fast) {
        pool_max_2d_f32(q, src, dst, rr);
    } else {
        pool_any(q, src, dst, rr);
    }
}

// ---- UPSCALE ----

struct Resample {
    const ggml_tensor * src;
    float               sf[4];
    float               offset; // 0.5: pixel centres; 0: corners (ALIGN_CORNERS)

    float at(int64_t x, int64_t y, int64_t i2, int64_t i3) const {
        x = std::clamp<int64_t>(x, 0, src->ne[0] - 1);
        y = std::clamp<int64_t>(y, 0, src->ne[1] - 1);
        return *reinterpret_cast<const float *>(cdata(src) + size_t(x) * src->nb[0] + size_t(y) * src->nb[1] +
                                                size_t(i2) * src->nb[2] + size_t(i3) * src->nb[3]);
    }
    int64_t nearest(int64_t i, int dim) const {
        return std::clamp<int64_t>(int64_t(float(i) / sf[dim]), 0, src->ne[dim] - 1);
    }
};

float cubic_near(float x, float a) {
    return ((a + 2) * x - (a + 3)) * x * x + 1;
}
float cubic_far(float x, float a) {
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}
// Cubic convolution (a = -0.75) through four samples at -1, 0, 1, 2 for t in [0, 1).
float cubic(const float v[4], float t) {
    constexpr float a = -0.75f;
    return v[0] * cubic_far(t + 1, a) + v[1] * cubic_near(t, a) + v[2] * cubic_near(1 - t, a) +
           v[3] * cubic_far(2 - t, a);
}

float triangle(float x) {
    return std::max(1.0f - std::fabs(x), 0.0f);
}

void compute_upscale(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src   = dst->src[0];
    if (ggml_is_empty(src)) {
        // Nothing to sample (the clamps below need a pixel): zeros.
        const Range rr = split_range(ggml_nrows(dst), p.ith, p.nth);
        for (int64_t r = rr.begin; r < rr.end; ++r) {
            const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
            char *        out = mdata(dst) + row_offset(dst, i1, i2, i3);
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                *reinterpret_cast<float *>(out + size_t(i0) * dst->nb[0]) = 0.0f;
            }
        }
        return;
    }
    const int32_t       flags = op_param_i32(dst, 0);
    const int           mode  = flags & 0xFF;
    Resample            rs{src, {}, 0.5f};
    for (int i = 0; i < 4; ++i) {
        rs.sf[i] = float(dst->ne[i]) / float(src->ne[i]);
    }
    if (flags & GGML_SCALE_FLAG_ALIGN_CORNERS) {
        rs.offset = 0.0f;
        for (int i = 0; i < 2; ++i) {
            if (dst->ne[i] > 1 && src->ne[i] > 1) {
                rs.sf[i] = float(dst->ne[i] - 1) / float(src->ne[i] - 1);
            }
        }
    }
    const float off = rs.offset;
    // Antialiasing: a triangle filter stretched over 1/scale source pixels when downscaling.
    const float support[2]  = {std::max(1.0f, 1.0f / rs.sf[0]), std::max(1.0f, 1.0f / rs.sf[1])};
    const float inv_span[2] = {1.0f / support[0], 1.0f / support[1]};

    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const Range   rr = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t i1 = r % OH, i2 = (r / OH) % dst->ne[2], i3 = r / (OH * dst->ne[2]);
        const int64_t j2 = rs.nearest(i2, 2), j3 = rs.nearest(i3, 3);
        char *        out = mdata(dst) + row_offset(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < OW; ++i0) {
            float v = 0.0f;
            if (mode == GGML_SCALE_MODE_NEAREST) {
                v = rs.at(rs.nearest(i0, 0), rs.nearest(i1, 1), j2, j3);
            } else if (mode == GGML_SCALE_MODE_BILINEAR && (flags & GGML_SCALE_FLAG_ANTIALIAS)) {
                const float   x  = (float(i0) + off) / rs.sf[0];
                const float   y  = (float(i1) + off) / rs.sf[1];
                const int64_t x0 = std::max<int64_t>(int64_t(x - support[0] + off), 0);
                const int64_t x1 = std::min<int64_t>(int64_t(x + support[0] + off), src->ne[0]);
                const int64_t y0 = std::max<int64_t>(int64_t(y - support[1] + off), 0);
                const int64_t y1 = std::min<int64_t>(int64_t(y + support[1] + off), src->ne[1]);
                float         total = 0.0f;
                for (int64_t sy = y0; sy < y1; ++sy) {
                    const float wy = triangle((float(sy) - y + off) * inv_span[1]);
                    for (int64_t sx = x0; sx < x1; ++sx) {
                        const float w = triangle((float(sx) - x + off) * inv_span[0]) * wy;
                        if (w > 0.0f) {
                            v += rs.at(sx, sy, j2, j3) * w;
                            total += w;
                        }
                    }
                }
                if (total > 0.0f) {
                    v /= total;
                }
            } else {
                const float   x  = (float(i0) + off) / rs.sf[0] - off;
                const float   y  = (float(i1) + off) / rs.sf[1] - off;
                const int64_t x0 = int64_t(std::floor(x)), y0 = int64_t(std::floor(y));
                if (mode == GGML_SCALE_MODE_BILINEAR) {
                    const int64_t cx = std::clamp<int64_t>(x0, 0, src->ne[0] - 1);
                    const int64_t cy = std::clamp<int64_t>(y0, 0, src->ne[1] - 1);
                    const float   dx = std::clamp(x - float(cx), 0.0f, 1.0f);
                    const float   dy = std::clamp(y - float(cy), 0.0f, 1.0f);
                    v = rs.at(cx, cy, j2, j3) * (1 - dx) * (1 - dy) + rs.at(x0 + 1, cy, j2, j3) * dx * (1 - dy) +
                        rs.at(cx, y0 + 1, j2, j3) * (1 - dx) * dy + rs.at(x0 + 1, y0 + 1, j2, j3) * dx * dy;
                } else {
                    const float dx = x - float(x0), dy = y - float(y0);
                    float       rows[4];
                    for (int64_t k = 0; k < 4; ++k) {
                        const float line[4] = {rs.at(x0 - 1, y0 + k - 1, j2, j3), rs.at(x0, y0 + k - 1, j2, j3),
                                               rs.at(x0 + 1, y0 + k - 1, j2, j3), rs.at(x0 + 2, y0 + k - 1, j2, j3)};
                        rows[k]             = cubic(line, dx);
                    }
                    v = cubic(rows, dy);
                }
            }
            *reinterpret_cast<float *>(out + size_t(i0) * dst->nb[0]) = v;
        }
    }
}

// ---- WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS ----

// Copies n values from one row to another, converting between float types.
void copy_row(const ggml_tensor * src, const char * from, ggml_tensor * dst, char * to, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        store_float(dst->type, to + size_t(i) * dst->nb[0], load_float(src->type, from + size_t(i) * src->nb[0]));
    }
}

void zero_row(ggml_tensor * dst, char * to, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        store_float(dst->type, to + size_t(i) * dst->nb[0], 0.0f);
    }
}

// dst [C, w, w, npx*npy]: window (px, py) = i3 % npx, i3 / npx.
void compute_win_part(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t       npx = op_param_i32(dst, 0), w = op_param_i32(dst, 2);
    const Range         rr  = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t i1 = r % w, i2 = (r / w) % w, i3 = r / (w * w);
        const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
        char *        to = mdata(dst) + row_offset(dst, i1, i2, i3);
        if (x < src->ne[1] && y < src->ne[2]) {
            copy_row(src, cdata(src) + row_offset(src, x, y, 0), dst, to, dst->ne[0]);
        } else {
            zero_row(dst, to, dst->ne[0]);
        }
    }
}

void compute_win_unpart(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t       w   = op_param_i32(dst, 0);
    const int64_t       npx = (dst->ne[1] + w - 1) / w;
    const Range         rr  = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t x = r % dst->ne[1], y = r / dst->ne[1];
        copy_row(src, cdata(src) + row_offset(src, x % w, y % w, (y / w) * npx + x / w), dst,
                 mdata(dst) + row_offset(dst, x, y, 0), dst->ne[0]);
    }
}

void compute_get_rel_pos(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t       kh  = dst->ne[1];
    const Range         rr  = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t k = r % kh, q = r / kh;
        copy_row(src, cdata(src) + row_offset(src, kh - 1 - k + q, 0, 0), dst, mdata(dst) + row_offset(dst, k, q, 0),
                 dst->ne[0]);
    }
}

// Every tensor is contiguous (the constructor's rule, checked by supports):
// row r of a, of length K*K, gets ph[k / K] and pw[k % K] of row r of pw, ph.
void compute_add_rel_pos(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const float *       pw = static_cast<const float *>(dst->src[1]->data);
    const float *       ph = static_cast<const float *>(dst->src[2]->data);
    const int64_t       K  = dst->src[1]->ne[0];
    const int64_t       n  = a->ne[0];
    const int64_t       biased = ggml_nrows(dst->src[1]);
    const Range         rr     = split_range(ggml_nrows(a), p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const float * x = static_cast<const float *>(a->data) + r * n;
        float *       y = static_cast<float *>(dst->data) + r * n;
        if (r >= biased) {
            std::copy(x, x + n, y);
            continue;
        }
        const float * w = pw + r * K;
        const float * h = ph + r * K;
        for (int64_t i = 0; i < K; ++i) {
            for (int64_t j = 0; j < K; ++j) {
                y[i * K + j] = x[i * K + j] + h[i] + w[j];
            }
        }
    }
}

// ---- supports ----

bool is_f32(const ggml_tensor * t) {
    return t != nullptr && t->type == GGML_TYPE_F32;
}

// Shapes and parameters are the operators' rules (Note [Shape rules] in
// core/fits.h); here the types the kernels read and write.
bool supports_pool(const ggml_tensor * op) {
    return is_float_type(op->src[0]->type) && op->type == GGML_TYPE_F32;
}

// UPSCALE, WIN_PART, WIN_UNPART.
bool supports_f32_in_out(const ggml_tensor * op) {
    return is_f32(op->src[0]) && op->type == GGML_TYPE_F32;
}

bool supports_get_rel_pos(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    return a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_F32;
}

bool supports_add_rel_pos(const ggml_tensor * op) {
    return is_f32(op->src[0]) && is_f32(op->src[1]) && is_f32(op->src[2]) && op->type == GGML_TYPE_F32;
}

} // namespace

void add_pool_kernels(OpKernels & t) {
    t[GGML_OP_POOL_1D]     = {compute_pool<false>, supports_pool, nullptr};
    t[GGML_OP_POOL_2D]     = {compute_pool<true>, supports_pool, nullptr};
    t[GGML_OP_UPSCALE]     = {compute_upscale, supports_f32_in_out, nullptr};
    t[GGML_OP_WIN_PART]    = {compute_win_part, supports_f32_in_out, nullptr};
    t[GGML_OP_WIN_UNPART]  = {compute_win_unpart, supports_f32_in_out, nullptr};
    t[GGML_OP_GET_REL_POS] = {compute_get_rel_pos, supports_get_rel_pos, nullptr};
    t[GGML_OP_ADD_REL_POS] = {compute_add_rel_pos, supports_add_rel_pos, nullptr};
}

} // namespace loom::cpu
