#include "products.h"

#include <algorithm>
#include <climits>
#include <new>
#include <system_error>
#include <thread>

#include <cblas.h>

#include "core/common.h"
#include "workers.h"

namespace loom::blas {

namespace {

// Below this many converted elements per thread, waking another thread
// costs about as much as the work it would take over.
constexpr int64_t k_min_convert_per_thread = int64_t(1) << 15;

// Floats of src0 converted at a time (4 MiB): small enough to stay in the
// last-level cache until sgemm has packed them, large enough that each
// sgemm call has hundreds of rows to work on.
constexpr int64_t k_panel_floats = int64_t(1) << 20;

// A logical R x C matrix of floats, element (i, j) at base + i * si + j * sj
// bytes, as BLAS reads it: op(X) = X with X row-major, or op(X) = X^T with
// the storage read as a row-major C x R matrix.
struct BlasView {
    CBLAS_TRANSPOSE trans = CblasNoTrans;
    int             ld    = 0;
};

bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

// false when no unit stride (or no valid leading dimension) exists. A
// matrix of one row or one column has no meaningful second stride, so any
// leading dimension of the right size serves.
bool blas_view(size_t si, size_t sj, int64_t rows, int64_t cols, BlasView * v) {
    const int64_t fl = int64_t(sizeof(float));
    if (sj == sizeof(float) && (rows == 1 || (si % sizeof(float) == 0 && int64_t(si) / fl >= cols))) {
        v->trans = CblasNoTrans;
        v->ld    = int(rows == 1 ? std::max<int64_t>(cols, 1) : int64_t(si) / fl);
        return fits_int(rows == 1 ? cols : int64_t(si) / fl);
    }
    if (si == sizeof(float) && (cols == 1 || (sj % sizeof(float) == 0 && int64_t(sj) / fl >= rows))) {
        v->trans = CblasTrans;
        v->ld    = int(cols == 1 ? std::max<int64_t>(rows, 1) : int64_t(sj) / fl);
        return fits_int(cols == 1 ? rows : int64_t(sj) / fl);
    }
    return false;
}

bool is_product(const ggml_tensor * op) {
    return op->op == GGML_OP_MUL_MAT || op->op == GGML_OP_OUT_PROD;
}

// Element strides (bytes) of the logical matrices of a product, before any
// conversion of src0: B is N x K from src1, A is K x M from src0.
struct Strides {
    size_t b_si, b_sj; // B(n, k)
    size_t a_si, a_sj; // A(k, m)
};

Strides strides_of(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    if (op->op == GGML_OP_MUL_MAT) {
        return {b->nb[1], b->nb[0], a->nb[0], a->nb[1]};
    }
    return {b->nb[0], b->nb[1], a->nb[1], a->nb[0]};
}

// Strides of A after src0 was converted to dense F32 rows along its dimension 0.
void converted_a_strides(const ggml_tensor * op, size_t * si, size_t * sj) {
    const size_t row = size_t(op->src[0]->ne[0]) * sizeof(float);
    if (op->op == GGML_OP_MUL_MAT) {
        *si = sizeof(float); // k runs along the row
        *sj = row;
    } else {
        *si = row; // m runs along the row
        *sj = sizeof(float);
    }
}

bool converts_src0(const ggml_tensor * op) {
    return op->src[0]->type != GGML_TYPE_F32;
}

} // namespace

GemmSize gemm_size(const ggml_tensor * op) {
    GemmSize            s;
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    if (op->op == GGML_OP_MUL_MAT) {
        s.m = a->ne[1];
        s.k = a->ne[0];
        s.n = b->ne[1];
    } else {
        s.m = a->ne[0];
        s.k = a->ne[1];
        s.n = b->ne[0];
    }
    return s;
}

bool can_compute(const ggml_tensor * op) {
    if (!is_product(op)) {
        return false;
    }
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    if (a == nullptr || b == nullptr || op->type != GGML_TYPE_F32 || b->type != GGML_TYPE_F32) {
        return false;
    }
    const GemmSize s = gemm_size(op);
    if (!fits_int(s.m) || !fits_int(s.n) || !fits_int(s.k) || s.k == 0) {
        return false;
    }
    if (ggml_is_empty(op)) {
        return true; // nothing to compute
    }
    // Broadcasting of src0 over src1 by whole factors, as the ops require.
    if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        return false;
    }

    BlasView       v;
    const Strides  st = strides_of(op);
    if (!blas_view(st.b_si, st.b_sj, s.n, s.k, &v)) {
        return false;
    }
    if (converts_src0(op)) {
        const ggml_type_traits * traits = ggml_get_type_traits(a->type);
        if (traits == nullptr || traits->to_float == nullptr || a->nb[0] != ggml_type_size(a->type)) {
            return false;
        }
        size_t si = 0, sj = 0;
        converted_a_strides(op, &si, &sj);
        if (!blas_view(si, sj, s.k, s.m, &v)) {
            return false;
        }
    } else if (!blas_view(st.a_si, st.a_sj, s.k, s.m, &v)) {
        return false;
    }
    // C is written row-major: BLAS has no transposed output.
    return op->nb[0] == sizeof(float) && blas_view(op->nb[1], op->nb[0], s.n, s.m, &v) && v.trans == CblasNoTrans;
}

ProductWorkspace::ProductWorkspace()
    : n_threads_(std::min(GGML_DEFAULT_N_THREADS, int(std::max(1u, std::thread::hardware_concurrency())))) {}

ProductWorkspace::~ProductWorkspace() = default;

float * ProductWorkspace::conversion_buffer(size_t n_floats) {
    if (n_floats > work_floats_) {
        work_.reset();
        work_floats_ = 0;
        // Not a vector: zero-filling memory that is overwritten at once is a wasted pass over it.
        work_.reset(new (std::nothrow) float[n_floats]);
        if (!work_) {
            LOOM_LOG_ERROR("BLAS: cannot allocate %zu bytes to convert weights to F32\n", n_floats * sizeof(float));
            return nullptr;
        }
        work_floats_ = n_floats;
    }
    return work_.get();
}

bool ProductWorkspace::ensure_pool() {
    if (pool_ && pool_->size() == n_threads_) {
        return true;
    }
    pool_.reset(); // join the old workers before starting new ones
    try {
        pool_ = std::make_unique<WorkerPool>(n_threads_);
    } catch (const std::system_error & e) {
        LOOM_LOG_ERROR("BLAS: cannot start %d conversion threads: %s\n", n_threads_ - 1, e.what());
        return false;
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("BLAS: out of memory starting %d conversion threads\n", n_threads_ - 1);
        return false;
    }
    return true;
}

void ProductWorkspace::convert_rows(const ggml_tensor * t, int64_t i2, int64_t i3, int64_t first_row,
                                    int64_t n_rows, float * out) {
    const int64_t   row_len  = t->ne[0];
    ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
    const char *    base = static_cast<const char *>(t->data) + i2 * t->nb[2] + i3 * t->nb[3] + first_row * t->nb[1];
    const size_t    nb1  = t->nb[1];

    const int64_t by_size = std::max<int64_t>(1, n_rows * row_len / k_min_convert_per_thread);
    const int     n       = int(std::min<int64_t>({int64_t(pool_->size()), n_rows, by_size}));
    pool_->run(n, [&](int ith) {
        const int64_t first = n_rows * ith / n;
        const int64_t last  = n_rows * (ith + 1) / n;
        for (int64_t r = first; r < last; ++r) {
            to_float(base + r * nb1, out + r * row_len, row_len);
        }
    });
}

ggml_status ProductWorkspace::compute_product(ggml_tensor * op) {
    LOOM_ASSERT(can_compute(op));
    if (ggml_is_empty(op)) {
        return GGML_STATUS_SUCCESS;
    }
    const ggml_tensor * a  = op->src[0];
    const ggml_tensor * b  = op->src[1];
    const GemmSize      s  = gemm_size(op);
    const Strides       st = strides_of(op);
    const int64_t       r2 = b->ne[2] / a->ne[2];
    const int64_t       r3 = b->ne[3] / a->ne[3];

    BlasView   vb, vc;
    const bool ok = blas_view(st.b_si, st.b_sj, s.n, s.k, &vb) && blas_view(op->nb[1], op->nb[0], s.n, s.m, &vc);
    LOOM_ASSERT(ok && vc.trans == CblasNoTrans);
    auto b_matrix = [&](int64_t i2, int64_t i3) {
        return static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
    };
    auto c_matrix = [&](int64_t i2, int64_t i3) {
        return static_cast<char *>(op->data) + i2 * op->nb[2] + i3 * op->nb[3];
    };

    if (!converts_src0(op)) {
        BlasView va;
        LOOM_ASSERT(blas_view(st.a_si, st.a_sj, s.k, s.m, &va));
        for (int64_t i3 = 0; i3 < op->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < op->ne[2]; ++i2) {
                const auto * A = reinterpret_cast<const float *>(static_cast<const char *>(a->data) +
                                                                 (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3]);
                cblas_sgemm(CblasRowMajor, vb.trans, va.trans, int(s.n), int(s.m), int(s.k), 1.0f,
                            reinterpret_cast<const float *>(b_matrix(i2, i3)), vb.ld, A, va.ld, 0.0f,
                            reinterpret_cast<float *>(c_matrix(i2, i3)), vc.ld);
            }
        }
        return GGML_STATUS_SUCCESS;
    }

    // src0 of another type is converted a panel of rows at a time into a
    // buffer that stays in cache while sgemm reads it: converting whole
    // matrices would write and read back four bytes per weight through
    // memory, and hold as many bytes as the weights in F32. A panel of
    // mul_mat's src0 is a range of M (columns of C); of out_prod's, a range
    // of K, accumulated into C.
    if (!ensure_pool()) {
        return GGML_STATUS_FAILED;
    }
    const int64_t row_len = a->ne[0];
    const int64_t rows    = a->ne[1];
    int64_t       panel   = std::max<int64_t>(1, k_panel_floats / row_len);
    if (panel >= rows) {
        panel = rows;
    } else if (panel > 16) {
        panel -= panel % 16;
    }
    float * w = conversion_buffer(size_t(panel * row_len));
    if (w == nullptr) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    const bool is_mul_mat = op->op == GGML_OP_MUL_MAT;
    for (int64_t i03 = 0; i03 < a->ne[3]; ++i03) {
        for (int64_t i02 = 0; i02 < a->ne[2]; ++i02) {
            for (int64_t r0 = 0; r0 < rows; r0 += panel) {
                const int64_t p = std::min(panel, rows - r0);
                convert_rows(a, i02, i03, r0, p, w);
                for (int64_t i3 = i03 * r3; i3 < (i03 + 1) * r3; ++i3) {
                    for (int64_t i2 = i02 * r2; i2 < (i02 + 1) * r2; ++i2) {
                        const char * B = b_matrix(i2, i3);
                        auto *       C = reinterpret_cast<float *>(c_matrix(i2, i3));
                        if (is_mul_mat) {
                            // C[:, r0 : r0 + p] = B (N x K) * panel^T, the panel p rows of K.
                            cblas_sgemm(CblasRowMajor, vb.trans, CblasTrans, int(s.n), int(p), int(s.k), 1.0f,
                                        reinterpret_cast<const float *>(B), vb.ld, w, int(row_len), 0.0f, C + r0,
                                        vc.ld);
                        } else {
                            // C += B[:, r0 : r0 + p] (N x p) * panel (p rows of M).
                            cblas_sgemm(CblasRowMajor, vb.trans, CblasNoTrans, int(s.n), int(s.m), int(p), 1.0f,
                                        reinterpret_cast<const float *>(B + r0 * st.b_sj), vb.ld, w, int(row_len),
                                        r0 == 0 ? 0.0f : 1.0f, C, vc.ld);
                        }
                    }
                }
            }
        }
    }
    return GGML_STATUS_SUCCESS;
}

void set_library_threads(int n_threads) {
#if defined(OPENBLAS_VERSION)
    // A setting of the whole process; cheap when unchanged.
    if (openblas_get_num_threads() != n_threads) {
        openblas_set_num_threads(n_threads);
    }
#else
    (void) n_threads;
#endif
}

const char * library_name() {
#if defined(OPENBLAS_VERSION)
    return "OpenBLAS";
#else
    return "CBLAS";
#endif
}

} // namespace loom::blas
