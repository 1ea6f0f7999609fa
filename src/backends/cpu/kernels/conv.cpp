// Convolutions: IM2COL, IM2COL_3D, COL2IM_1D, CONV_2D, CONV_3D, CONV_2D_DW,
// CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D.
//
// Sources are read through their strides as F32, F16 or BF16 and computed
// in f32. The direct convolutions gather each output position's patch (the
// im2col row) into the thread's scratch and take one dot product per output
// channel against the kernel, packed once into f32 rows; the transposed ones
// pack kernel and input with the input channels innermost, so every term is
// a dot product over channels. Each output element is computed by one
// thread with a sequence of operations fixed by the shapes, so results do
// not depend on the thread count.

#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/pool.h"
#include "backends/cpu/kernels/vec.h"
#include "core/common.h"

namespace loom::cpu {
namespace {

constexpr size_t ALIGN = 64;

// Output positions of a direct convolution gathered per pass.
constexpr int64_t TILE = 8;
// Positions of an im2col run at most (their rows stay in L1 together).
constexpr int64_t RUN = 16;

// n adjacent floats from src to dst. Kernel widths up to 8 are copies of a
// size known to the compiler (a few moves), not calls of memcpy.
template <int N>
void copy_fixed(float * dst, const char * src) {
    std::memcpy(dst, src, N * sizeof(float));
}

inline void copy_window(float * dst, const char * src, int64_t n) {
    switch (n) {
        case 1: copy_fixed<1>(dst, src); break;
        case 2: copy_fixed<2>(dst, src); break;
        case 3: copy_fixed<3>(dst, src); break;
        case 4: copy_fixed<4>(dst, src); break;
        case 5: copy_fixed<5>(dst, src); break;
        case 6: copy_fixed<6>(dst, src); break;
        case 7: copy_fixed<7>(dst, src); break;
        case 8: copy_fixed<8>(dst, src); break;
        default: std::memcpy(dst, src, size_t(n) * sizeof(float)); break;
    }
}

// Where an image's element (x, y, z, channel c, batch n) lives, and the
// kernel's window over it: the geometry every patch gather reads.
struct Geometry {
    const char * data = nullptr;
    ggml_type    type = GGML_TYPE_F32;
    int64_t      in[3]{1, 1, 1};  // W, H, D
    size_t       nb[3]{0, 0, 0};  // bytes per step of x, y, z
    size_t       nb_c = 0;        // bytes per channel
    size_t       nb_n = 0;        // bytes per batch
    int64_t      channels = 1;    // IC
    int64_t      batch    = 1;    // N
    int64_t      k[3]{1, 1, 1};   // KW, KH, KD
    int64_t      s[3]{1, 1, 1};
    int64_t      p[3]{0, 0, 0};
    int64_t      d[3]{1, 1, 1};
    int64_t      out[3]{1, 1, 1}; // OW, OH, OD

    int64_t row_len() const { return channels * k[0] * k[1] * k[2]; }
    int64_t positions() const { return out[0] * out[1] * out[2] * batch; }

    // Position index -> (x, y, z, n), x fastest.
    void split(int64_t pos, int64_t o[4]) const {
        o[0] = pos % out[0];
        o[1] = (pos / out[0]) % out[1];
        o[2] = (pos / (out[0] * out[1])) % out[2];
        o[3] = pos / (out[0] * out[1] * out[2]);
    }

    // The patches of count positions from o along x (o[0] + count <=
    // out[0]), patch t at rows + t * stride: each line of the input is read
    // once for the run rather than once per position, and in order.
    void gather_run(const int64_t o[4], int64_t count, float * rows, size_t stride) const {
        // F32 lines read element by element: a window wholly inside its line
        // is k[0] adjacent floats.
        const bool dense_x = type == GGML_TYPE_F32 && nb[0] == sizeof(float) && d[0] == 1;
        for (int64_t c = 0; c < channels; ++c) {
            const char * base = data + size_t(o[3]) * nb_n + size_t(c) * nb_c;
            for (int64_t kz = 0; kz < k[2]; ++kz) {
                const int64_t iz = o[2] * s[2] + kz * d[2] - p[2];
                for (int64_t ky = 0; ky < k[1]; ++ky) {
                    const int64_t iy = o[1] * s[1] + ky * d[1] - p[1];
                    float *       r0 = rows + ((c * k[2] + kz) * k[1] + ky) * k[0];
                    if (iz < 0 || iz >= in[2] || iy < 0 || iy >= in[1]) {
                        for (int64_t t = 0; t < count; ++t) std::fill(r0 + t * stride, r0 + t * stride + k[0], 0.0f);
                        continue;
                    }
                    const char * line = base + size_t(iz) * nb[2] + size_t(iy) * nb[1];
                    for (int64_t t = 0; t < count; ++t) {
                        const int64_t x0 = (o[0] + t) * s[0] - p[0];
                        float *       r  = r0 + t * stride;
                        if (dense_x && x0 >= 0 && x0 + k[0] <= in[0]) {
                            copy_window(r, line + size_t(x0) * sizeof(float), k[0]);
                        } else if (type == GGML_TYPE_F32) {
                            for (int64_t kx = 0; kx < k[0]; ++kx) {
                                const int64_t ix = x0 + kx * d[0];
                                float         v  = 0.0f;
                                if (ix >= 0 && ix < in[0]) std::memcpy(&v, line + size_t(ix) * nb[0], sizeof(float));
                                r[kx] = v;
                            }
                        } else {
                            for (int64_t kx = 0; kx < k[0]; ++kx) {
                                const int64_t ix = x0 + kx * d[0];
                                r[kx] = ix < 0 || ix >= in[0] ? 0.0f : load_float(type, line + size_t(ix) * nb[0]);
                            }
                        }
                    }
                }
            }
        }
    }

    // The patch of output position o, in the order [c][kz][ky][kx], as f32.
    void gather(const int64_t o[4], float * row) const { gather_run(o, 1, row, 0); }

    // The patches of positions [pos, pos + count), patch t at rows + t *
    // stride, in runs along x.
    void gather_span(int64_t pos, int64_t count, float * rows, size_t stride) const {
        for (int64_t t = 0; t < count;) {
            int64_t o[4];
            split(pos + t, o);
            const int64_t run = std::min(out[0] - o[0], count - t);
            gather_run(o, run, rows + size_t(t) * stride, stride);
            t += run;
        }
    }
};

int32_t param(const ggml_tensor * t, int i) {
    return op_param_i32(t, i);
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// IM2COL: 2D image [W, H, C, N] or 1D signal [L, C, N] under kernel src0.
Geometry im2col_geometry(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    const bool          two_d = param(op, 6) == 1;
    Geometry            g;
    g.data  = static_cast<const char *>(b->data);
    g.type  = b->type;
    g.in[0] = b->ne[0];
    g.nb[0] = b->nb[0];
    g.k[0]  = a->ne[0];
    g.s[0]  = param(op, 0);
    g.p[0]  = param(op, 2);
    g.d[0]  = param(op, 4);
    if (two_d) {
        g.in[1]    = b->ne[1];
        g.nb[1]    = b->nb[1];
        g.k[1]     = a->ne[1];
        g.s[1]     = param(op, 1);
        g.p[1]     = param(op, 3);
        g.d[1]     = param(op, 5);
        g.channels = b->ne[2];
        g.nb_c     = b->nb[2];
        g.batch    = b->ne[3];
        g.nb_n     = b->nb[3];
    } else {
        g.channels = b->ne[1];
        g.nb_c     = b->nb[1];
        g.batch    = b->ne[2];
        g.nb_n     = b->nb[2];
    }
    for (int i = 0; i < 2; ++i) {
        g.out[i] = out_size(g.in[i], g.k[i], g.s[i], g.p[i], g.d[i]);
    }
    return g;
}

// IM2COL_3D and CONV_3D: image [W, H, D, C*N], channel c of batch n at n*C + c.
Geometry geometry_3d(const ggml_tensor * op, const int32_t * sp, int64_t channels) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    Geometry            g;
    g.data     = static_cast<const char *>(b->data);
    g.type     = b->type;
    g.channels = channels;
    g.batch    = b->ne[3] / channels;
    g.nb_c     = b->nb[3];
    g.nb_n     = b->nb[3] * size_t(channels);
    for (int i = 0; i < 3; ++i) {
        g.in[i]  = b->ne[i];
        g.nb[i]  = b->nb[i];
        g.k[i]   = a->ne[i];
        g.s[i]   = sp[i];
        g.p[i]   = sp[3 + i];
        g.d[i]   = sp[6 + i];
        g.out[i] = out_size(g.in[i], g.k[i], g.s[i], g.p[i], g.d[i]);
    }
    return g;
}

// CONV_2D: image [W, H, C, N].
Geometry geometry_2d(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    Geometry            g;
    g.data     = static_cast<const char *>(b->data);
    g.type     = b->type;
    g.channels = b->ne[2];
    g.nb_c     = b->nb[2];
    g.batch    = b->ne[3];
    g.nb_n     = b->nb[3];
    for (int i = 0; i < 2; ++i) {
        g.in[i]  = b->ne[i];
        g.nb[i]  = b->nb[i];
        g.k[i]   = a->ne[i];
        g.s[i]   = param(op, i);
        g.p[i]   = param(op, 2 + i);
        g.d[i]   = param(op, 4 + i);
        g.out[i] = out_size(g.in[i], g.k[i], g.s[i], g.p[i], g.d[i]);
    }
    return g;
}

// Bytes from dst's data to the row (or element) of output position o.
struct OutStrides {
    size_t x = 0, y = 0, z = 0, n = 0;
    size_t at(const int64_t o[4]) const {
        return size_t(o[0]) * x + size_t(o[1]) * y + size_t(o[2]) * z + size_t(o[3]) * n;
    }
};

// ---- IM2COL, IM2COL_3D ----

void run_im2col(const ComputeParams & p, ggml_tensor * dst, const Geometry & g, const OutStrides & os) {
    const int64_t n     = g.row_len();
    float *       tmp   = reinterpret_cast<float *>(static_cast<char *>(p.wdata) +
                                                    size_t(p.ith) * align_up(size_t(n) * sizeof(float), ALIGN));
    const Range   range = split_range(g.positions(), p.ith, p.nth);
    const bool    runs  = dst->type == GGML_TYPE_F32 && os.x % sizeof(float) == 0;
    for (int64_t pos = range.begin; pos < range.end;) {
        int64_t o[4];
        g.split(pos, o);
        char * out = static_cast<char *>(dst->data) + os.at(o);
        if (runs) {
            // The rest of this output row, within the thread's range.
            const int64_t count = std::min({g.out[0] - o[0], range.end - pos, RUN});
            g.gather_run(o, count, reinterpret_cast<float *>(out), os.x / sizeof(float));
            pos += count;
            continue;
        }
        ++pos;
        if (dst->type == GGML_TYPE_F32) {
            g.gather(o, reinterpret_cast<float *>(out));
        } else {
            g.gather(o, tmp);
            store_floats(dst->type, tmp, out, ggml_type_size(dst->type), n);
        }
    }
}

void compute_im2col(const ComputeParams & p, ggml_tensor * dst) {
    const Geometry g = im2col_geometry(dst);
    OutStrides     os;
    os.x = dst->nb[1];
    if (param(dst, 6) == 1) {
        os.y = dst->nb[2];
        os.n = dst->nb[3];
    } else {
        os.n = dst->nb[2];
    }
    run_im2col(p, dst, g, os);
}

void compute_im2col_3d(const ComputeParams & p, ggml_tensor * dst) {
    const Geometry g = geometry_3d(dst, dst->op_params, param(dst, 9));
    OutStrides     os;
    os.x = dst->nb[1];
    os.y = dst->nb[2];
    os.z = dst->nb[3];
    os.n = dst->nb[3] * size_t(g.out[2]);
    run_im2col(p, dst, g, os);
}

size_t im2col_work_size(int64_t row_len, int n_threads) {
    return align_up(size_t(row_len) * sizeof(float), ALIGN) * size_t(std::max(n_threads, 1));
}

// ---- CONV_2D, CONV_3D ----

// The kernel as out_channels f32 rows of g.row_len() values, [c][kz][ky][kx];
// kernel element (x, y, z, c, oc) at x*nb[0] + y*nb[1] + z*nb_z + c*nb_c + oc*nb_oc.
struct KernelLayout {
    int64_t out_channels;
    size_t  nb_z, nb_c, nb_oc;
};

// CONV_2D (three_d false) and CONV_3D differ in these three: where the
// kernel's elements lie, the image's geometry, where the result's lie.
template <bool three_d>
KernelLayout kernel_layout(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if constexpr (!three_d) {
        return {a->ne[3], 0, a->nb[2], a->nb[3]};
    } else {
        const int64_t c = param(dst, 9);
        return {param(dst, 11), a->nb[2], a->nb[3], a->nb[3] * size_t(c)};
    }
}

template <bool three_d>
Geometry conv_geometry(const ggml_tensor * dst) {
    return three_d ? geometry_3d(dst, dst->op_params, param(dst, 9)) : geometry_2d(dst);
}

template <bool three_d>
OutStrides conv_out_strides(const ggml_tensor * dst, size_t * nb_oc) {
    OutStrides os;
    os.x = dst->nb[0];
    os.y = dst->nb[1];
    if constexpr (!three_d) {
        *nb_oc = dst->nb[2];
        os.n   = dst->nb[3];
    } else {
        const int64_t oc = param(dst, 11);
        os.z             = dst->nb[2];
        *nb_oc           = dst->nb[3];
        os.n             = dst->nb[3] * size_t(oc);
    }
    return os;
}

size_t conv_kernel_bytes(const Geometry & g, const KernelLayout & kl) {
    return align_up(size_t(kl.out_channels) * size_t(g.row_len()) * sizeof(float), ALIGN);
}

size_t conv_tile_bytes(const Geometry & g) {
    return align_up(size_t(TILE) * size_t(g.row_len()) * sizeof(float), ALIGN);
}

// The matrix-product path of CONV_2D and CONV_3D (Note [Convolution as a
// product]): per thread a block of gathered patches and the GEMM's scratch.
constexpr int64_t GEMM_ROWS = 128;

size_t conv_gemm_thread_bytes(const Geometry & g, const KernelLayout & kl) {
    size_t gemm = 0;
    for (const KernelTable * kt : {&best_kernels(), &portable_kernels()}) {
        gemm = std::max(gemm, gemm_b_block_bytes(*kt, GGML_TYPE_F32, kl.out_channels) +
                                  gemm_private_bytes(*kt, GGML_TYPE_F32));
    }
    return align_up(size_t(GEMM_ROWS) * size_t(g.row_len()) * sizeof(float), ALIGN) + align_up(gemm, ALIGN);
}

// Note [Convolution as a product]
// An f32 result whose positions of one image lie one float apart, and whose
// output channels are whole floats apart, is a matrix product: C[position +
// oc * ldc] = patch(position) . kernel row oc. The thread gathers up to
// GEMM_ROWS patches of one image (runs along x) and hands them to the GEMM
// as its a rows, the packed kernel rows as its b columns. Every element is
// still one f32 sum in increasing order of the patch index, whatever the
// block or the thread.
bool conv_takes_gemm(const ggml_tensor * dst, const Geometry & g, const OutStrides & os, size_t nb_oc) {
    return dst->type == GGML_TYPE_F32 && os.x == sizeof(float) && os.y == size_t(g.out[0]) * sizeof(float) &&
           (g.out[2] == 1 || os.z == size_t(g.out[0] * g.out[1]) * sizeof(float)) && nb_oc % sizeof(float) == 0;
}

void conv_by_gemm(const ComputeParams & p, ggml_tensor * dst, const Geometry & g, const KernelLayout & kl,
                  const OutStrides & os, size_t nb_oc, const float * kernel) {
    const KernelTable & kt      = kernels(p.use_ref);
    const int64_t       n       = g.row_len();
    char *              mine    = static_cast<char *>(p.wdata) + conv_kernel_bytes(g, kl) +
                                  size_t(p.ith) * conv_gemm_thread_bytes(g, kl);
    float *             patches = reinterpret_cast<float *>(mine);
    char *              b_block = mine + align_up(size_t(GEMM_ROWS) * size_t(n) * sizeof(float), ALIGN);
    char *              priv    = b_block + align_up(gemm_b_block_bytes(kt, GGML_TYPE_F32, kl.out_channels), ALIGN);
    const int64_t       per_image = g.out[0] * g.out[1] * g.out[2];
    const Range         pr        = split_range(g.positions(), p.ith, p.nth);
    for (int64_t b0 = pr.begin; b0 < pr.end;) {
        const int64_t rows = std::min({GEMM_ROWS, pr.end - b0, per_image - b0 % per_image});
        int64_t       first[4];
        g.split(b0, first);
        g.gather_span(b0, rows, patches, size_t(n));
        GemmProblem prob;
        prob.a_type = GGML_TYPE_F32;
        prob.a      = reinterpret_cast<const char *>(patches);
        prob.lda    = size_t(n) * sizeof(float);
        prob.b      = reinterpret_cast<const char *>(kernel);
        prob.ldb    = size_t(n) * sizeof(float);
        prob.b_step = sizeof(float);
        prob.c      = reinterpret_cast<float *>(static_cast<char *>(dst->data) + os.at(first));
        prob.ldc    = nb_oc / sizeof(float);
        prob.K      = n;
        gemm(kt, prob, 0, rows, 0, kl.out_channels, b_block, priv, nullptr);
        b0 += rows;
    }
}

template <bool three_d>
void compute_conv(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const Geometry      g  = conv_geometry<three_d>(dst);
    const KernelLayout  kl = kernel_layout<three_d>(dst);
    const int64_t       n  = g.row_len();
    float *             kernel = static_cast<float *>(p.wdata);

    const Range kr = split_range(kl.out_channels * g.channels * g.k[2] * g.k[1], p.ith, p.nth);
    for (int64_t r = kr.begin; r < kr.end; ++r) {
        const int64_t ky  = r % g.k[1];
        const int64_t kz  = (r / g.k[1]) % g.k[2];
        const int64_t c   = (r / (g.k[1] * g.k[2])) % g.channels;
        const int64_t oc  = r / (g.k[1] * g.k[2] * g.channels);
        const char *  src = static_cast<const char *>(a->data) + size_t(ky) * a->nb[1] + size_t(kz) * kl.nb_z +
                           size_t(c) * kl.nb_c + size_t(oc) * kl.nb_oc;
        load_floats(a->type, src, a->nb[0], g.k[0], kernel + oc * n + ((c * g.k[2] + kz) * g.k[1] + ky) * g.k[0]);
    }
    p.sync();

    size_t           nb_oc;
    const OutStrides os = conv_out_strides<three_d>(dst, &nb_oc);
    if (conv_takes_gemm(dst, g, os, nb_oc)) {
        conv_by_gemm(p, dst, g, kl, os, nb_oc, kernel);
        return;
    }
    float * tile = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + conv_kernel_bytes(g, kl) +
                                             size_t(p.ith) * conv_tile_bytes(g));
    const VecDotFn   dot = vec_dot_info(GGML_TYPE_F32, p.use_ref).dot;
    const Range      pr  = split_range(g.positions(), p.ith, p.nth);
    for (int64_t t0 = pr.begin; t0 < pr.end; t0 += TILE) {
        const int64_t nt = std::min(TILE, pr.end - t0);
        size_t        offs[TILE];
        g.gather_span(t0, nt, tile, size_t(n));
        for (int64_t t = 0; t < nt; ++t) {
            int64_t o[4];
            g.split(t0 + t, o);
            offs[t] = os.at(o);
        }
        for (int64_t oc = 0; oc < kl.out_channels; ++oc) {
            const float * k = kernel + oc * n;
            for (int64_t t = 0; t < nt; ++t) {
                store_float(dst->type, static_cast<char *>(dst->data) + offs[t] + size_t(oc) * nb_oc,
                            dot(n, k, tile + t * n));
            }
        }
    }
}

// ---- CONV_2D_DW ----

void compute_conv_2d_dw(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t       KW = a->ne[0], KH = a->ne[1];
    const int64_t       W = b->ne[0], H = b->ne[1], C = b->ne[2];
    const int64_t       OW = dst->ne[0], OH = dst->ne[1];
    const int64_t       sx = param(dst, 0), sy = param(dst, 1), px = param(dst, 2), py = param(dst, 3);
    const int64_t       dx = param(dst, 4), dy = param(dst, 5);
    float *             knl = reinterpret_cast<float *>(static_cast<char *>(p.wdata) +
                                                        size_t(p.ith) * align_up(size_t(KW * KH) * sizeof(float), ALIGN));
    int64_t loaded = -1;

    // Rows (oy, channel, batch), channel-major so a thread's kernel changes rarely.
    const Range rr = split_range(OH * C * dst->ne[3], p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t oy = r % OH;
        const int64_t c  = (r / OH) % C;
        const int64_t n  = r / (OH * C);
        if (c != loaded) {
            for (int64_t ky = 0; ky < KH; ++ky) {
                load_floats(a->type, static_cast<const char *>(a->data) + size_t(ky) * a->nb[1] + size_t(c) * a->nb[3],
                            a->nb[0], KW, knl + ky * KW);
            }
            loaded = c;
        }
        const char * plane = static_cast<const char *>(b->data) + size_t(c) * b->nb[2] + size_t(n) * b->nb[3];
        char *       out   = static_cast<char *>(dst->data) + size_t(oy) * dst->nb[1] + size_t(c) * dst->nb[2] +
                     size_t(n) * dst->nb[3];
        for (int64_t ox = 0; ox < OW; ++ox) {
            float sum = 0.0f;
            for (int64_t ky = 0; ky < KH; ++ky) {
                const int64_t iy = oy * sy + ky * dy - py;
                if (iy < 0 || iy >= H) {
                    continue;
                }
                const char * line = plane + size_t(iy) * b->nb[1];
                for (int64_t kx = 0; kx < KW; ++kx) {
                    const int64_t ix = ox * sx + kx * dx - px;
                    if (ix >= 0 && ix < W) {
                        sum += knl[ky * KW + kx] * load_float(b->type, line + size_t(ix) * b->nb[0]);
                    }
                }
            }
            store_float(dst->type, out + size_t(ox) * dst->nb[0], sum);
        }
    }
}

// ---- CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D ----

// First input position whose window (k taps, stride s) reaches output t.
int64_t first_input(int64_t t, int64_t k, int64_t s) {
    return t < k ? 0 : (t - k + s) / s;
}

// Packs src's element (i0, i1, i2, i3) to out[((i3 * n2 + i2) * n1 + i1) * n0 + i0]
// under the permutation order (dimensions of src in the order of the packed
// ones, innermost first), rows [r0, r1) of the packed layout.
struct Packing {
    const ggml_tensor * src;
    int                 order[4]; // packed dim j is src dim order[j]
    float *             out;

    int64_t rows() const { return src->ne[order[1]] * src->ne[order[2]] * src->ne[order[3]]; }
    void    run(int64_t r0, int64_t r1) const {
        const int64_t n0 = src->ne[order[0]], n1 = src->ne[order[1]], n2 = src->ne[order[2]];
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t j1 = r % n1, j2 = (r / n1) % n2, j3 = r / (n1 * n2);
            const char *  base = static_cast<const char *>(src->data) + size_t(j1) * src->nb[order[1]] +
                                size_t(j2) * src->nb[order[2]] + size_t(j3) * src->nb[order[3]];
            load_floats(src->type, base, src->nb[order[0]], n0, out + r * n0);
        }
    }
};

// CONV_TRANSPOSE_1D and (two_d) CONV_TRANSPOSE_2D.
template <bool two_d>
void compute_conv_transpose(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t       s = param(dst, 0);
    // 1D: a [K, OC, IC], b [L, IC]; 2D: a [KW, KH, OC, IC], b [W, H, IC, N].
    const int64_t IC = two_d ? a->ne[3] : a->ne[2];
    const int64_t KW = a->ne[0], KH = two_d ? a->ne[1] : 1, OC = two_d ? a->ne[2] : a->ne[1];
    const int64_t W = b->ne[0], H = two_d ? b->ne[1] : 1;

    // kernel [oc][ky][kx][ic], input [n][y][x][ic]
    float *       kernel = static_cast<float *>(p.wdata);
    float *       input  = reinterpret_cast<float *>(static_cast<char *>(p.wdata) +
                                                     align_up(size_t(ggml_nelements(a)) * sizeof(float), ALIGN));
    const Packing pk = two_d ? Packing{a, {3, 0, 1, 2}, kernel} : Packing{a, {2, 0, 1, 3}, kernel};
    const Packing pi = two_d ? Packing{b, {2, 0, 1, 3}, input} : Packing{b, {1, 0, 2, 3}, input};
    const int64_t nk = pk.rows();
    const Range   pr = split_range(nk + pi.rows(), p.ith, p.nth);
    if (pr.begin < nk) {
        pk.run(pr.begin, std::min(pr.end, nk));
    }
    if (pr.end > nk) {
        pi.run(std::max(pr.begin, nk) - nk, pr.end - nk);
    }
    p.sync();

    const VecDotFn dot = vec_dot_info(GGML_TYPE_F32, p.use_ref).dot;
    const int64_t  OW = dst->ne[0], OH = two_d ? dst->ne[1] : 1;
    // Rows (oy, oc, n) of dst.
    const Range rr = split_range(OH * OC * dst->ne[two_d ? 3 : 2], p.ith, p.nth);
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t oy  = r % OH;
        const int64_t oc  = (r / OH) % OC;
        const int64_t n   = r / (OH * OC);
        char *        out = static_cast<char *>(dst->data) +
                     (two_d ? size_t(oy) * dst->nb[1] + size_t(oc) * dst->nb[2] + size_t(n) * dst->nb[3]
                            : size_t(oc) * dst->nb[1] + size_t(n) * dst->nb[2]);
        const int64_t y0 = first_input(oy, KH, s), y1 = std::min(H - 1, oy / s);
        for (int64_t ox = 0; ox < OW; ++ox) {
            const int64_t x0 = first_input(ox, KW, s), x1 = std::min(W - 1, ox / s);
            float         sum = 0.0f;
            for (int64_t y = y0; y <= y1; ++y) {
                const float * krow = kernel + ((oc * KH + (oy - y * s)) * KW) * IC;
                const float * irow = input + ((n * H + y) * W) * IC;
                for (int64_t x = x0; x <= x1; ++x) {
                    sum += dot(IC, krow + (ox - x * s) * IC, irow + x * IC);
                }
            }
            reinterpret_cast<float *>(out)[ox] = sum;
        }
    }
}

// ---- COL2IM_1D ----

void compute_col2im_1d(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src  = dst->src[0];
    const int64_t       s    = param(dst, 0);
    const int64_t       OC   = param(dst, 1);
    const int64_t       pad  = param(dst, 2);
    const int64_t       K    = src->ne[0] / OC;
    const int64_t       T_in = src->ne[1];
    const int64_t       T    = dst->ne[0];
    const Range         rr   = split_range(T * OC, p.ith, p.nth);
    for (int64_t i = rr.begin; i < rr.end; ++i) {
        const int64_t t   = i % T;
        const int64_t oc  = i / T;
        const int64_t abs = t + pad; // position in the uncropped signal
        const int64_t j0  = first_input(abs, K, s);
        const int64_t j1  = std::min(T_in - 1, abs / s);
        float         sum = 0.0f;
        for (int64_t j = j0; j <= j1; ++j) {
            sum += load_float(src->type, static_cast<const char *>(src->data) + size_t(j) * src->nb[1] +
                                             size_t(oc * K + abs - j * s) * src->nb[0]);
        }
        store_float(dst->type, static_cast<char *>(dst->data) + size_t(t) * dst->nb[0] + size_t(oc) * dst->nb[1], sum);
    }
}

// ---- supports and scratch ----

bool float_src(const ggml_tensor * t) {
    return t != nullptr && is_float_type(t->type);
}

// Shapes and parameters are the operators' rules (Note [Shape rules] in
// core/fits.h); here the types and layouts the kernels read and write.
bool float_sources(const ggml_tensor * op) {
    return float_src(op->src[0]) && float_src(op->src[1]);
}

// IM2COL, IM2COL_3D: patch rows are written as contiguous runs.
bool supports_im2col(const ggml_tensor * op) {
    return float_sources(op) && (op->type == GGML_TYPE_F32 || op->type == GGML_TYPE_F16) &&
           op->nb[0] == ggml_type_size(op->type);
}

// CONV_2D, CONV_2D_DW.
bool supports_float_result(const ggml_tensor * op) {
    return float_sources(op) && is_float_type(op->type);
}

bool supports_conv_3d(const ggml_tensor * op) {
    return float_sources(op) && op->type == GGML_TYPE_F32;
}

// CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D.
bool supports_conv_transpose(const ggml_tensor * op) {
    return float_sources(op) && op->type == GGML_TYPE_F32 && op->nb[0] == sizeof(float);
}

bool supports_col2im_1d(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    return float_src(a);
}

size_t work_size_im2col(const ggml_tensor * op, int n_threads) {
    return im2col_work_size(im2col_geometry(op).row_len(), n_threads);
}

size_t work_size_im2col_3d(const ggml_tensor * op, int n_threads) {
    return im2col_work_size(geometry_3d(op, op->op_params, param(op, 9)).row_len(), n_threads);
}

template <bool three_d>
size_t work_size_conv(const ggml_tensor * op, int n_threads) {
    const Geometry     g  = conv_geometry<three_d>(op);
    const KernelLayout kl = kernel_layout<three_d>(op);
    return conv_kernel_bytes(g, kl) +
           std::max(conv_tile_bytes(g), conv_gemm_thread_bytes(g, kl)) * size_t(std::max(n_threads, 1));
}

size_t work_size_conv_2d_dw(const ggml_tensor * op, int n_threads) {
    return align_up(size_t(op->src[0]->ne[0] * op->src[0]->ne[1]) * sizeof(float), ALIGN) *
           size_t(std::max(n_threads, 1));
}

size_t work_size_conv_transpose(const ggml_tensor * op, int) {
    return align_up(size_t(ggml_nelements(op->src[0])) * sizeof(float), ALIGN) +
           size_t(ggml_nelements(op->src[1])) * sizeof(float);
}

} // namespace

void add_conv_kernels(OpKernels & t) {
    t[GGML_OP_IM2COL]            = {compute_im2col, supports_im2col, work_size_im2col};
    t[GGML_OP_IM2COL_3D]         = {compute_im2col_3d, supports_im2col, work_size_im2col_3d};
    t[GGML_OP_CONV_2D]           = {compute_conv<false>, supports_float_result, work_size_conv<false>};
    t[GGML_OP_CONV_3D]           = {compute_conv<true>, supports_conv_3d, work_size_conv<true>};
    t[GGML_OP_CONV_2D_DW]        = {compute_conv_2d_dw, supports_float_result, work_size_conv_2d_dw};
    t[GGML_OP_CONV_TRANSPOSE_1D] = {compute_conv_transpose<false>, supports_conv_transpose, work_size_conv_transpose};
    t[GGML_OP_CONV_TRANSPOSE_2D] = {compute_conv_transpose<true>, supports_conv_transpose, work_size_conv_transpose};
    t[GGML_OP_COL2IM_1D]         = {compute_col2im_1d, supports_col2im_1d, nullptr};
    add_pool_kernels(t);
}

} // namespace loom::cpu
