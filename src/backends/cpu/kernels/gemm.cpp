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

#include "gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/common.h"

namespace loom::cpu {

namespace {

constexpr size_t ALIGN = 64;

struct Scratch {
    float * a_pack; // kc x mc
    float * b_pack; // kc x nc (rounded up to whole panels)
    float * rows;   // up to 16 rows of kc: converted or gathered values
};

int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

size_t a_pack_bytes(const KernelTable & kt) {
    return align_up(size_t(round_up(kt.mc, kt.mr)) * size_t(kt.kc) * sizeof(float), ALIGN);
}
size_t rows_bytes(const KernelTable & kt) {
    return align_up(size_t(std::max(kt.mr, kt.nr)) * size_t(kt.kc) * sizeof(float), ALIGN);
}

// Rows [i0, i0 + mb) x depth [k0, k0 + kb) into mr-tall panels. F16 and
// BF16 rows are first converted into the row scratch (mr rows of kc).
void pack_a(const KernelTable & kt, const GemmProblem & pr, int64_t i0, int64_t mb, int64_t k0, int64_t kb,
            const Scratch & s) {
    const int     mr = kt.mr;
    const float * rows[16];
    for (int64_t ir = 0; ir < mb; ir += mr) {
        const int n = int(std::min<int64_t>(mr, mb - ir));
        for (int i = 0; i < n; ++i) {
            const char * row = pr.a + size_t(i0 + ir + i) * pr.lda;
            float *      tmp = s.rows + i * kt.kc;
            switch (pr.a_type) {
                case GGML_TYPE_F16:
                    kt.fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t *>(row) + k0, tmp, kb);
                    rows[i] = tmp;
                    break;
                case GGML_TYPE_BF16:
                    kt.bf16_to_fp32_row(reinterpret_cast<const uint16_t *>(row) + k0, tmp, kb);
                    rows[i] = tmp;
                    break;
                default:
                    rows[i] = reinterpret_cast<const float *>(row) + k0;
                    break;
            }
        }
        kt.gemm_pack(rows, n, mr, kb, s.a_pack + ir * kb);
    }
}

// Columns [j0, j0 + nb) x depth [k0, k0 + kb) into nr-wide panels starting
// at b_pack + offset. Columns whose values are not adjacent are gathered
// into the row scratch first.
void pack_b(const KernelTable & kt, const GemmProblem & pr, int64_t j0, int64_t nb, int64_t k0, int64_t kb,
            const Scratch & s, int64_t offset) {
    const int     nr = kt.nr;
    const float * cols[16];
    for (int64_t jr = 0; jr < nb; jr += nr) {
        const int n = int(std::min<int64_t>(nr, nb - jr));
        for (int j = 0; j < n; ++j) {
            const char * col = pr.b + size_t(j0 + jr + j) * pr.ldb + size_t(k0) * pr.b_step;
            if (pr.b_step == sizeof(float)) {
                cols[j] = reinterpret_cast<const float *>(col);
            } else {
                float * tmp = s.rows + j * kt.kc;
                for (int64_t k = 0; k < kb; ++k) {
                    std::memcpy(&tmp[k], col + size_t(k) * pr.b_step, sizeof(float));
                }
                cols[j] = tmp;
            }
        }
        kt.gemm_pack(cols, n, nr, kb, s.b_pack + offset + jr * kb);
    }
}

} // namespace

size_t gemm_b_block_bytes(const KernelTable & kt, int64_t N) {
    const int64_t cols = round_up(std::min<int64_t>(kt.nc, std::max<int64_t>(N, 1)), kt.nr);
    return align_up(size_t(cols) * size_t(kt.kc) * sizeof(float), ALIGN);
}

size_t gemm_private_bytes(const KernelTable & kt) {
    return a_pack_bytes(kt) + rows_bytes(kt);
}

void gemm_f32(const KernelTable & kt, const GemmProblem & pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
              float * b_pack, void * priv, const GemmTeam * team) {
    LOOM_ASSERT(kt.mr <= 16 && kt.nr <= 16); // pack_a and pack_b hold row pointers for 16
    const int ith = team != nullptr ? team->p->ith : 0;
    const int nth = team != nullptr ? team->p->nth : 1;
    auto      counter = [&](int64_t block) {
        // 64 bytes apart: the two are written by different phases.
        return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t *>(static_cast<char *>(team->counters) +
                                                                         64 * size_t(block % 2)));
    };
    if (team != nullptr && ith == 0) {
        counter(0).store(nth, std::memory_order_relaxed);
    }

    Scratch s;
    s.a_pack = static_cast<float *>(priv);
    s.rows   = reinterpret_cast<float *>(static_cast<char *>(priv) + a_pack_bytes(kt));
    s.b_pack = b_pack;

    const int     mr       = kt.mr, nr = kt.nr;
    const int64_t mc       = round_up(kt.mc, mr);
    const int64_t n_chunks = (m1 - m0 + mc - 1) / mc;
    int64_t       block    = 0;
    for (int64_t jc = n0; jc < n1; jc += kt.nc) {
        const int64_t nb = std::min<int64_t>(kt.nc, n1 - jc);
        for (int64_t pc = 0; pc < pr.K; pc += kt.kc, ++block) {
            const int64_t kb = std::min<int64_t>(kt.kc, pr.K - pc);
            // Panels of the b block, round robin over the team.
            const int64_t n_panels = (nb + nr - 1) / nr;
            for (int64_t pj = ith; pj < n_panels; pj += nth) {
                pack_b(kt, pr, jc + pj * nr, std::min<int64_t>(nr, nb - pj * nr), pc, kb, s, pj * nr * kb);
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
                pack_a(kt, pr, ic, mb, pc, kb, s);
                for (int64_t ir = 0; ir < mb; ir += mr) {
                    const float * ap = s.a_pack + ir * kb;
                    const int     m  = int(std::min<int64_t>(mr, mb - ir));
                    for (int64_t jr = 0; jr < nb; jr += nr) {
                        const int n = int(std::min<int64_t>(nr, nb - jr));
                        float *   c = pr.c + size_t(jc + jr) * pr.ldc + size_t(ic + ir);
                        kt.gemm_micro(kb, ap, s.b_pack + jr * kb, c, pr.ldc, m, n, pc > 0);
                    }
                }
            }
            if (team != nullptr) {
                team->p->sync(); // every chunk is done before the b block changes
            }
        }
    }
}

} // namespace loom::cpu
