// Chooses the kernel table once from the processor's features.

#include <cstdlib>
#include <cstring>

#include "backends/cpu/features.h"
#include "kernel_table.h"

namespace loom::cpu {

namespace {

bool avx2_runs() {
    // AVX2 code also uses FMA and F16C; all three are checked, with the OS
    // support for the YMM state that features() folds into them.
    const Features & f = features();
    return avx2_kernels() != nullptr && f.avx2 && f.fma && f.f16c;
}

bool avx512_runs() {
    const Features & f = features();
    return avx2_runs() && avx512_kernels() != nullptr && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
}

bool avx512bf16_runs() {
    return avx512_runs() && avx512bf16_kernels() != nullptr && features().avx512bf16;
}

const KernelTable & choose() {
    // LOOM_CPU_KERNELS=portable, =avx2 or =avx512 keeps a lesser table (to
    // compare or to test it); a table the processor cannot run is never
    // taken.
    const std::vector<const KernelTable *> tables = runnable_kernels();
    if (const char * want = std::getenv("LOOM_CPU_KERNELS")) {
        for (const KernelTable * t : tables) {
            if (std::strcmp(want, t->name) == 0) return *t;
        }
    }
    return *tables.back();
}

} // namespace

std::vector<const KernelTable *> runnable_kernels() {
    std::vector<const KernelTable *> out = {&portable_kernels()};
    if (avx2_runs()) out.push_back(avx2_kernels());
    if (avx512_runs()) out.push_back(avx512_kernels());
    if (avx512bf16_runs()) out.push_back(avx512bf16_kernels());
    return out;
}

ggml_type quant_operand_type(ggml_type weight_type) {
    switch (weight_type) {
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
        case GGML_TYPE_TQ1_0:
        case GGML_TYPE_TQ2_0: return GGML_TYPE_Q8_K;
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_1: return GGML_TYPE_Q8_1;
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_MXFP4: return GGML_TYPE_Q8_0;
        default: return GGML_TYPE_COUNT;
    }
}

const KernelTable & best_kernels() {
    static const KernelTable & table = choose();
    return table;
}

#if !(defined(__x86_64__) || defined(__i386__))
const KernelTable * avx2_kernels() {
    return nullptr;
}
const KernelTable * avx512_kernels() {
    return nullptr;
}
const KernelTable * avx512bf16_kernels() {
    return nullptr;
}
#endif

} // namespace loom::cpu
