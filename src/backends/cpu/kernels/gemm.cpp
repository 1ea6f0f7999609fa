// Note [GEMM panels]
// The product walks C in blocks that keep each operand in the cache level
// where it is reused (the BLIS loop nest, with the roles of the operands
// taken by a's rows, which the micro-kernel loads as vectors, and b's
// columns, which it broadcasts):
//   for each block of nc columns:
//     for each depth block of kc:             pack b block (kc x nc) into nr-wide
//                                             panels; it stays in L3, shared
//       for each chunk of mc rows:            pack it into mr-tall panels (L2)
//         for each mr panel of the chunk:     one a panel (kc x mr) stays in L1
//           for each nr panel of b:           micro-kernel on an mr x nr tile of C
// A packed a panel holds, for each k, the mr weights of its rows side by side
// (ap[k * mr + i]); a b panel holds, for each k, the nr values of its columns
// (bp[k * nr + j]). Both are read strictly sequentially by the micro-kernel;
// the a panel is reused from L1 for every b panel. Rows and columns past the
// matrix are packed as zeros, so edge tiles run the same loop. F16 and BF16
// weights are converted to f32 while packed.
//
// A team of threads packs each b block together (each thread some of its
// panels), waits, then takes row chunks from a shared counter, and waits
// again before the next b block overwrites this one. Two counters alternate
// between blocks, so one can be reset while the other is in use.
//
// The first depth block writes C, later ones continue each element's sum
// from the value in C: every element is one running sum over k = 0..K-1, the
// same whatever the block sizes or the thread that computes it.
//
// Note [BF16 GEMM panels]
// With bf16 weights and a table that has a BF16 GEMM (kernel_table.h), both
// operands stay bf16 and one instruction multiplies a pair of k (vdpbf16ps):
// weights are packed as stored, activations are rounded to bf16 while packed,
// to nearest even as the matrix-vector and the reference paths round them.
// The loop nest, the team and the blocking are the ones above; a panel holds
// one 32-bit word per pair of k, so a depth block of kb values is
// (kb + 1) / 2 words deep, and kc is even so that every depth block starts
// a pair. Each element is one running sum over the pairs in increasing
// order, again the same whatever the blocks or the threads.

#include "gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/repack.h"
#include "core/common.h"

namespace loom::cpu {

namespace {

constexpr size_t ALIGN = 64;

int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

struct Blocks {
    int     mr, nr;
    int64_t mc, kc, nc;
};

// The operand formats. Each says what a panel element is (T), how many of
// them a row or column of a panel holds for kb values of k (depth), how much
// private scratch a thread needs, and how panels are packed and multiplied.

// f32 panels: every weight type, F16 and BF16 rows converted while packed.
struct F32Format {
    using T                        = float;
    static constexpr int MAX_WIDTH = 32; // of the table's gemm_pack
    const KernelTable &  kt;

    Blocks         blocks() const { return {kt.mr, kt.nr, kt.mc, kt.kc, kt.nc}; }
    static int64_t depth(int64_t kb) { return kb; }
    size_t         a_pack_bytes() const {
        return align_up(size_t(round_up(kt.mc, kt.mr)) * size_t(kt.kc) * sizeof(float), ALIGN);
    }
    // After the a chunk: up to MAX_WIDTH rows of kc, converted or gathered
    // values.
    size_t private_bytes() const {
        return a_pack_bytes() + align_up(size_t(std::max(kt.mr, kt.nr)) * size_t(kt.kc) * sizeof(float), ALIGN);
    }
    float * rows(void * priv) const { return reinterpret_cast<float *>(static_cast<char *>(priv) + a_pack_bytes()); }

    // Rows [i0, i0 + mb) x depth [k0, k0 + kb) into mr-tall panels. F16 and
    // BF16 rows are first converted into the row scratch (mr rows of kc).
    void pack_a(const GemmProblem & pr, int64_t i0, int64_t mb, int64_t k0, int64_t kb, float * a_pack,
                void * priv) const {
        const int     mr  = kt.mr;
        float *       tmp = rows(priv);
        const float * src[MAX_WIDTH];
        for (int64_t ir = 0; ir < mb; ir += mr) {
            const int n = int(std::min<int64_t>(mr, mb - ir));
            for (int i = 0; i < n; ++i) {
                const char * row = pr.a + size_t(i0 + ir + i) * pr.lda;
                float *      t   = tmp + i * kt.kc;
                if (pr.a_repacked) {
                    // Note [Repacked weights]: the row's values by chunks.
                    constexpr int64_t CH = REPACK_F16_CHUNK;
                    LOOM_ASSERT(pr.a_type == GGML_TYPE_F16 && k0 % CH == 0 && kb % CH == 0);
                    const int64_t r     = i0 + ir + i;
                    const char *  group = pr.a + size_t(r / REPACK_ROWS) * REPACK_ROWS * pr.lda;
                    for (int64_t k = k0; k < k0 + kb; k += CH) {
                        const char * chunk = group + repacked_f16_chunk(size_t(r % REPACK_ROWS), size_t(k / CH));
                        kt.fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t *>(chunk), t + (k - k0), CH);
                    }
                    src[i] = t;
                    continue;
                }
                switch (pr.a_type) {
                    case GGML_TYPE_F16:
                        kt.fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t *>(row) + k0, t, kb);
                        src[i] = t;
                        break;
                    case GGML_TYPE_BF16:
                        kt.bf16_to_fp32_row(reinterpret_cast<const uint16_t *>(row) + k0, t, kb);
                        src[i] = t;
                        break;
                    case GGML_TYPE_F32: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
                    case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K:
                    case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
                    case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
                    case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
                    case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32:
                    case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0:
                    case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0:
                    case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
                        src[i] = reinterpret_cast<const float *>(row) + k0;
                        break;
                }
            }
            kt.gemm_pack(src, n, mr, kb, a_pack + ir * kb);
        }
    }

    // Columns [j0, j0 + nb) x depth [k0, k0 + kb) into nr-wide panels.
    // Columns whose values are not adjacent are gathered into the row
    // scratch first.
    void pack_b(const GemmProblem & pr, int64_t j0, int64_t nb, int64_t k0, int64_t kb, float * out,
                void * priv) const {
        const int     nr  = kt.nr;
        float *       tmp = rows(priv);
        const float * cols[MAX_WIDTH];
        for (int64_t jr = 0; jr < nb; jr += nr) {
            const int n = int(std::min<int64_t>(nr, nb - jr));
            for (int j = 0; j < n; ++j) {
                const char * col = pr.b + size_t(j0 + jr + j) * pr.ldb + size_t(k0) * pr.b_step;
                if (pr.b_step == sizeof(float)) {
                    cols[j] = reinterpret_cast<const float *>(col);
                } else {
                    float * t = tmp + j * kt.kc;
                    for (int64_t k = 0; k < kb; ++k) {
                        std::memcpy(&t[k], col + size_t(k) * pr.b_step, sizeof(float));
                    }
                    cols[j] = t;
                }
            }
            kt.gemm_pack(cols, n, nr, kb, out + jr * kb);
        }
    }

    void micro(int64_t kb, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
               bool accumulate) const {
        kt.gemm_micro(kb, ap, bp, c, ldc, m, n, accumulate);
    }
};

// bf16 pairs (Note [BF16 GEMM panels]).
struct Bf16Format {
    using T                        = uint32_t;
    static constexpr int MAX_WIDTH = 32;
    const GemmBf16 &     g;

    Blocks         blocks() const { return {g.mr, g.nr, g.mc, g.kc, g.nc}; }
    static int64_t depth(int64_t kb) { return (kb + 1) / 2; }
    size_t         private_bytes() const {
        return align_up(size_t(round_up(g.mc, g.mr)) * size_t(depth(g.kc)) * sizeof(T), ALIGN);
    }

    void pack_a(const GemmProblem & pr, int64_t i0, int64_t mb, int64_t k0, int64_t kb, T * a_pack, void *) const {
        const uint16_t * src[MAX_WIDTH];
        for (int64_t ir = 0; ir < mb; ir += g.mr) {
            const int n = int(std::min<int64_t>(g.mr, mb - ir));
            for (int i = 0; i < n; ++i) {
                src[i] = reinterpret_cast<const uint16_t *>(pr.a + size_t(i0 + ir + i) * pr.lda) + k0;
            }
            g.pack_a(src, n, kb, a_pack + ir * depth(kb));
        }
    }

    void pack_b(const GemmProblem & pr, int64_t j0, int64_t nb, int64_t k0, int64_t kb, T * out, void *) const {
        const char * cols[MAX_WIDTH];
        for (int64_t jr = 0; jr < nb; jr += g.nr) {
            const int n = int(std::min<int64_t>(g.nr, nb - jr));
            for (int j = 0; j < n; ++j) {
                cols[j] = pr.b + size_t(j0 + jr + j) * pr.ldb + size_t(k0) * pr.b_step;
            }
            g.pack_b(cols, pr.b_step, n, kb, out + jr * depth(kb));
        }
    }

    void micro(int64_t kb, const T * ap, const T * bp, float * c, size_t ldc, int m, int n, bool accumulate) const {
        g.micro(kb, ap, bp, c, ldc, m, n, accumulate);
    }
};

template <class F> size_t b_block_bytes(const F & f, int64_t N) {
    const Blocks  bl   = f.blocks();
    const int64_t cols = round_up(std::min<int64_t>(bl.nc, std::max<int64_t>(N, 1)), bl.nr);
    return align_up(size_t(cols) * size_t(F::depth(bl.kc)) * sizeof(typename F::T), ALIGN);
}

// The loop nest of Note [GEMM panels] on one operand format.
template <class F>
void run(const F & f, const GemmProblem & pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1, void * b_block,
         void * priv, const GemmTeam * team) {
    using T           = typename F::T;
    const Blocks bl   = f.blocks();
    LOOM_ASSERT(bl.mr <= F::MAX_WIDTH && bl.nr <= F::MAX_WIDTH); // the packers' arrays of row pointers
    const int ith     = team != nullptr ? team->p->ith : 0;
    const int nth     = team != nullptr ? team->p->nth : 1;
    auto      counter = [&](int64_t block) {
        // 64 bytes apart: the two are written by different phases.
        return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t *>(static_cast<char *>(team->counters) +
                                                                     64 * size_t(block % 2)));
    };
    if (team != nullptr && ith == 0) {
        counter(0).store(nth, std::memory_order_relaxed);
    }

    T * const     a_pack   = static_cast<T *>(priv);
    T * const     b_pack   = static_cast<T *>(b_block);
    const int     mr       = bl.mr, nr = bl.nr;
    const int64_t mc       = round_up(bl.mc, mr);
    const int64_t n_chunks = (m1 - m0 + mc - 1) / mc;
    int64_t       block    = 0;
    for (int64_t jc = n0; jc < n1; jc += bl.nc) {
        const int64_t nb = std::min<int64_t>(bl.nc, n1 - jc);
        for (int64_t pc = 0; pc < pr.K; pc += bl.kc, ++block) {
            const int64_t kb = std::min<int64_t>(bl.kc, pr.K - pc);
            const int64_t kd = F::depth(kb);
            // Panels of the b block, round robin over the team.
            const int64_t n_panels = (nb + nr - 1) / nr;
            for (int64_t pj = ith; pj < n_panels; pj += nth) {
                f.pack_b(pr, jc + pj * nr, std::min<int64_t>(nr, nb - pj * nr), pc, kb, b_pack + pj * nr * kd, priv);
            }
            if (team != nullptr) {
                if (ith == 0) {
                    counter(block + 1).store(nth, std::memory_order_relaxed);
                }
                team->p->sync(); // the b block is packed
            }
            auto next = [&](int64_t chunk) {
                return team != nullptr ? counter(block).fetch_add(1, std::memory_order_relaxed) : chunk + 1;
            };
            for (int64_t chunk = ith; chunk < n_chunks; chunk = next(chunk)) {
                const int64_t ic = m0 + chunk * mc;
                const int64_t mb = std::min<int64_t>(mc, m1 - ic);
                f.pack_a(pr, ic, mb, pc, kb, a_pack, priv);
                for (int64_t ir = 0; ir < mb; ir += mr) {
                    const T * ap = a_pack + ir * kd;
                    const int m  = int(std::min<int64_t>(mr, mb - ir));
                    for (int64_t jr = 0; jr < nb; jr += nr) {
                        const int n = int(std::min<int64_t>(nr, nb - jr));
                        float *   c = pr.c + size_t(jc + jr) * pr.ldc + size_t(ic + ir);
                        f.micro(kb, ap, b_pack + jr * kd, c, pr.ldc, m, n, pc > 0);
                    }
                }
            }
            if (team != nullptr) {
                team->p->sync(); // every chunk is done before the b block changes
            }
        }
    }
}

} // namespace

bool gemm_uses_bf16(const KernelTable & kt, ggml_type a_type) {
    return a_type == GGML_TYPE_BF16 && kt.gemm_bf16 != nullptr;
}

size_t gemm_b_block_bytes(const KernelTable & kt, ggml_type a_type, int64_t N) {
    return gemm_uses_bf16(kt, a_type) ? b_block_bytes(Bf16Format{*kt.gemm_bf16}, N) : b_block_bytes(F32Format{kt}, N);
}

size_t gemm_private_bytes(const KernelTable & kt, ggml_type a_type) {
    return gemm_uses_bf16(kt, a_type) ? Bf16Format{*kt.gemm_bf16}.private_bytes() : F32Format{kt}.private_bytes();
}

void gemm(const KernelTable & kt, const GemmProblem & pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
          void * b_block, void * priv, const GemmTeam * team) {
    if (gemm_uses_bf16(kt, pr.a_type)) {
        LOOM_ASSERT(kt.gemm_bf16->kc % 2 == 0);
        run(Bf16Format{*kt.gemm_bf16}, pr, m0, m1, n0, n1, b_block, priv, team);
    } else {
        run(F32Format{kt}, pr, m0, m1, n0, n1, b_block, priv, team);
    }
}

} // namespace loom::cpu
