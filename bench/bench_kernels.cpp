// Matrix-vector kernels of every kernel table this processor runs, on one
// thread with the weights in L2 (128 rows of 4096, best of many runs), so
// that what is compared is the kernels' arithmetic, not the memory: weight
// bytes per second and multiply-adds per second, for 1, 4 and 8 columns;
// Q4_0, Q8_0, F16, BF16 (also repacked, and on prepared columns where the
// table has them), then Q4_K, Q5_K, Q6_K and IQ4_XS (also repacked where the
// table has a kernel for the CPU_REPACK layout), then the products of many
// columns on rows decoded once (Note [Rows decoded once]) as the matrix
// product's items run them: 64 rows decoded, then met by every group of
// eight columns, for 8, 64 and 256 columns (the decoding counted).
//
//   bench_kernels [decoded]    (decoded: only the rows decoded once)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/features.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

using namespace loom::cpu;

namespace {

// The best of 500 timed calls of fn, in seconds.
template <class F> double best_of_500(F && fn) {
    double best = 1e9;
    for (int rep = 0; rep < 500; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

// One line of the table: bytes of weights and multiply-adds per second.
void print_rate(const KernelTable * kt, ggml_type t, int cols, size_t bytes, int64_t K, int64_t M, double s) {
    std::printf("%-12s %-5s %4d %12.1f %12.1f\n", kt->name, ggml_type_name(t), cols, double(bytes) / s * 1e-9,
                double(K) * M * cols / s * 1e-9);
}

// An M x K matrix of type t in a CPU_REPACK buffer, from the bytes of ggml's
// layout; data() is null where the buffer keeps the type in ggml's layout.
class Repacked {
  public:
    Repacked(ggml_type t, int64_t K, int64_t M, const std::vector<char> & bytes) {
        ctx_             = ggml_init({ggml_tensor_overhead(), nullptr, true});
        ggml_tensor * rt = ggml_new_tensor_2d(ctx_, t, K, M);
        buf_             = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, repack_buffer_type());
        if (buf_ != nullptr && is_repacked(rt)) {
            ggml_backend_tensor_set(rt, bytes.data(), 0, bytes.size());
            data_ = rt->data;
        }
    }
    ~Repacked() {
        ggml_backend_buffer_free(buf_);
        ggml_free(ctx_);
    }
    Repacked(const Repacked &)             = delete;
    Repacked & operator=(const Repacked &) = delete;
    const void * data() const { return data_; }

  private:
    ggml_context *        ctx_  = nullptr;
    ggml_backend_buffer_t buf_  = nullptr;
    const void *          data_ = nullptr;
};

// The rows-decoded-once lines: for each type a table decodes, items of 64
// rows decoded (decode_rows, or decode_rows_repacked from ra where not null)
// then multiplied by cols columns, eight at a time.
void bench_decoded(const std::vector<const KernelTable *> & tables, int64_t K, int64_t M, const std::vector<float> & w,
                   std::mt19937 & rng) {
    constexpr int64_t item = 64;
    constexpr int     most = 256;
    std::normal_distribution<float> nd;
    std::vector<float>              x(size_t(K) * most);
    for (float & v : x) v = nd(rng);
    for (ggml_type t : {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS}) {
        const size_t      lda = ggml_row_size(t, K), ldb = ggml_row_size(GGML_TYPE_Q8_K, K);
        std::vector<char> a(lda * M), b(ldb * most);
        ggml_quantize_chunk(t, w.data(), a.data(), 0, M, K, nullptr);
        for (int c = 0; c < most; ++c) {
            ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x.data() + size_t(c) * K, b.data() + ldb * c, K);
        }
        const Repacked    rw(t, K, M, a);
        std::vector<char> dec(decoded_rows_bytes(K, item) + 64);
        char *            dp = dec.data() + (64 - reinterpret_cast<uintptr_t>(dec.data()) % 64) % 64;
        std::vector<float> dst(size_t(M) * most);
        for (int cols : {8, 64, 256}) {
            for (const KernelTable * kt : tables) {
                for (bool packed : {false, true}) {
                    const DecodeRowsFn decode = packed ? kt->decode_rows_repacked[t] : kt->decode_rows[t];
                    const void *       src    = packed ? rw.data() : a.data();
                    if (decode == nullptr || src == nullptr || kt->gemv_decoded[t] == nullptr) {
                        continue;
                    }
                    const double best = best_of_500([&] {
                        for (int64_t r0 = 0; r0 < M; r0 += item) {
                            const int64_t rows = std::min(item, M - r0);
                            decode(K, static_cast<const char *>(src) + size_t(r0) * lda, lda, rows, dp);
                            for (int c0 = 0; c0 < cols; c0 += GEMV_MAX_COLS) {
                                kt->gemv_decoded[t](K, dp, decoded_row_bytes(K), rows, b.data() + ldb * size_t(c0), ldb,
                                                    std::min(GEMV_MAX_COLS, cols - c0),
                                                    dst.data() + size_t(c0) * size_t(M) + size_t(r0), size_t(M));
                            }
                        }
                    });
                    std::printf("%-12s %-6s %4d %12.1f %12.1f  (decoded%s)\n", kt->name, ggml_type_name(t), cols,
                                double(a.size()) / best * 1e-9, double(K) * M * cols / best * 1e-9,
                                packed ? ", repacked" : "");
                }
            }
        }
    }
}

} // namespace

int main(int argc, char ** argv) {
    constexpr int64_t K = 4096, M = 128;
    const bool        decoded_only = argc > 1 && std::string(argv[1]) == "decoded";
    const Features &  f      = features();
    const auto        tables = runnable_kernels();
    std::mt19937                    rng(1);
    std::normal_distribution<float> nd;
    std::vector<float>              w(size_t(K * M)), x(size_t(K) * 8);
    for (float & v : w) v = nd(rng);
    for (float & v : x) v = nd(rng);
    std::printf("%s, one thread, weights %lld x %lld in cache\n", f.brand.c_str(), (long long) M, (long long) K);
    std::printf("%-12s %-5s %4s %12s %12s\n", "table", "type", "cols", "GB/s", "GMAC/s");
    if (decoded_only) {
        bench_decoded(tables, K, M, w, rng);
        return 0;
    }
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        const ggml_type   bt = ggml_is_quantized(t) ? GGML_TYPE_Q8_0 : t;
        std::vector<char> a(ggml_row_size(t, K) * M), b(ggml_row_size(bt, K) * 8);
        ggml_quantize_chunk(t, w.data(), a.data(), 0, M, K, nullptr);
        ggml_quantize_chunk(bt, x.data(), b.data(), 0, 8, K, nullptr);
        // The same weights in a CPU_REPACK buffer (null where the type is not repacked).
        const Repacked rw(t, K, M, a);
        const void *   ra = rw.data();
        for (int cols : {1, 4, 8}) {
            for (const KernelTable * kt : tables) {
                const GemvFn fn = t == GGML_TYPE_Q4_0   ? kt->gemv_q4_0
                                  : t == GGML_TYPE_Q8_0 ? kt->gemv_q8_0
                                  : t == GGML_TYPE_F16  ? kt->gemv_f16
                                                        : kt->gemv_bf16;
                std::vector<float> dst(size_t(M) * 8);
                double             best = best_of_500([&] {
                    fn(K, a.data(), ggml_row_size(t, K), M, b.data(), ggml_row_size(bt, K), cols, dst.data(), M);
                });
                print_rate(kt, t, cols, a.size(), K, M, best);
                // The same columns prepared once (the path of mul_mat).
                const QGemmKernels qk = t == GGML_TYPE_Q4_0 ? kt->qgemm_q4_0 : t == GGML_TYPE_Q8_0 ? kt->qgemm_q8_0 : QGemmKernels{};
                const QGemmFn        qg = qk.gemm;
                const QColsPrepareFn qp = qk.prepare;
                if (qg != nullptr && qp != nullptr) {
                    std::vector<char> prep(qk.cols_bytes(K));
                    qp(K, b.data(), ggml_row_size(bt, K), cols, prep.data());
                    best = 1e9;
                    for (int rep = 0; rep < 500; ++rep) {
                        const auto t0 = std::chrono::steady_clock::now();
                        qg(K, 0, K / 32, a.data(), ggml_row_size(t, K), M, prep.data(), b.data(), ggml_row_size(bt, K),
                           cols, nullptr, dst.data(), M);
                        best = std::min(best,
                                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                    }
                    std::printf("%-9s %-5s %4d %12.1f %12.1f  (columns prepared)\n", kt->name, ggml_type_name(t), cols,
                                double(a.size()) / best * 1e-9, double(K) * M * cols / best * 1e-9);
                }
                // The repacked layout (Note [Repacked weights]), columns prepared.
                const QGemmKernels xk = t == GGML_TYPE_Q4_0   ? kt->qgemm_q4_0_x8
                                        : t == GGML_TYPE_Q8_0 ? kt->qgemm_q8_0_x8
                                                              : QGemmKernels{};
                const GemvFn       xf = t == GGML_TYPE_F16 ? kt->gemv_f16_x8 : nullptr;
                if ((xk.gemm != nullptr || xf != nullptr) && ra != nullptr) {
                    std::vector<char> prep(xk.gemm != nullptr ? xk.cols_bytes(K) : 0);
                    if (xk.gemm != nullptr) {
                        xk.prepare(K, b.data(), ggml_row_size(bt, K), cols, prep.data());
                    }
                    best = 1e9;
                    for (int rep = 0; rep < 500; ++rep) {
                        const auto t0 = std::chrono::steady_clock::now();
                        if (xk.gemm != nullptr) {
                            xk.gemm(K, 0, K / 32, ra, ggml_row_size(t, K), M, prep.data(), b.data(),
                                    ggml_row_size(bt, K), cols, nullptr, dst.data(), M);
                        } else {
                            xf(K, ra, ggml_row_size(t, K), M, b.data(), ggml_row_size(bt, K), cols, dst.data(), M);
                        }
                        best = std::min(best,
                                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                    }
                    std::printf("%-9s %-5s %4d %12.1f %12.1f  (repacked)\n", kt->name, ggml_type_name(t), cols,
                                double(a.size()) / best * 1e-9, double(K) * M * cols / best * 1e-9);
                }
            }
        }
    }
    // The K-quants of Q4_K_M and Q5_K_M files and IQ4_XS, against columns in
    // their vec_dot_type (Q8_K) as mul_mat converts them.
    for (ggml_type t : {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS}) {
        const ggml_type   bt = ggml_get_type_traits_cpu(t)->vec_dot_type;
        std::vector<char> a(ggml_row_size(t, K) * M), b(ggml_row_size(bt, K) * 8);
        ggml_quantize_chunk(t, w.data(), a.data(), 0, M, K, nullptr);
        for (int c = 0; c < 8; ++c) {
            ggml_get_type_traits_cpu(bt)->from_float(x.data() + size_t(c) * K, b.data() + ggml_row_size(bt, K) * c, K);
        }
        // The same weights in a CPU_REPACK buffer, where the table in use
        // repacks the type (its layout: the gemv_repacked entries' of the
        // tables that read it).
        const Repacked rw(t, K, M, a);
        const void *   ra = rw.data();
        for (int cols : {1, 4, 8}) {
            for (const KernelTable * kt : tables) {
                const GemvFn fn = kt->gemv_quant[t];
                if (fn == nullptr) {
                    continue;
                }
                std::vector<float> dst(size_t(M) * 8);
                print_rate(kt, t, cols, a.size(), K, M, best_of_500([&] {
                               fn(K, a.data(), ggml_row_size(t, K), M, b.data(), ggml_row_size(bt, K), cols,
                                  dst.data(), M);
                           }));
                const GemvFn rf = kt->gemv_repacked[t];
                if (rf != nullptr && ra != nullptr) {
                    const double best = best_of_500([&] {
                        rf(K, ra, ggml_row_size(t, K), M, b.data(), ggml_row_size(bt, K), cols, dst.data(), M);
                    });
                    std::printf("%-12s %-5s %4d %12.1f %12.1f  (repacked)\n", kt->name, ggml_type_name(t), cols,
                                double(a.size()) / best * 1e-9, double(K) * M * cols / best * 1e-9);
                }
            }
        }
    }
    bench_decoded(tables, K, M, w, rng);
    return 0;
}
