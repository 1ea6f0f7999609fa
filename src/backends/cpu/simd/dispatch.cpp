// Chooses the kernel table once from the processor's features.

#include <cstdlib>
#include <cstring>

#include "backends/cpu/features.h"
#include "ggml-cpu.h"
#include "kernel_table.h"

namespace loom::cpu {

namespace {

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

// The processor's flags come first, always: the table accessors build their
// tables (code compiled for the instruction set) only after these pass.
bool avx2_table_runs() {
    // AVX2 code also uses FMA and F16C; all three are checked, with the OS
    // support for the YMM state that features() folds into them.
    const Features & f = features();
    return f.avx2 && f.fma && f.f16c;
}

bool avx512_table_runs() {
    const Features & f = features();
    return avx2_table_runs() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
}

bool avx512bf16_table_runs() {
    return avx512_table_runs() && features().avx512bf16;
}

bool neon_table_runs() {
    return features().neon;
}

bool neon_dotprod_table_runs() {
    return neon_table_runs() && features().dotprod;
}

bool neon_i8mm_table_runs() {
    return neon_dotprod_table_runs() && features().i8mm;
}

std::vector<const KernelTable *> runnable_kernels() {
    std::vector<const KernelTable *> out = {&portable_kernels()};
    for (const KernelTable * t :
         {avx2_kernels(), avx512_kernels(), avx512bf16_kernels(), neon_kernels(), neon_dotprod_kernels(),
          neon_i8mm_kernels()}) {
        if (t != nullptr) out.push_back(t);
    }
    return out;
}

ggml_type quant_operand_type(ggml_type weight_type) {
    // The weight type's vec_dot_type (type_traits_cpu.cpp, as ggml's), for
    // the block types whose products are gemv_quant entries: not Q4_0 and
    // Q8_0 (entries of their own), the activation types, or the types with
    // no SIMD product (NVFP4, Q1_0, Q2_0).
    switch (weight_type) {
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1:
        case GGML_TYPE_Q8_K:
        case GGML_TYPE_NVFP4:
        case GGML_TYPE_Q1_0:
        case GGML_TYPE_Q2_0: return GGML_TYPE_COUNT;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8:
        case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M:
        case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_COUNT:
            break;
    }
    if (weight_type < 0 || weight_type >= GGML_TYPE_COUNT || !ggml_is_quantized(weight_type)) {
        return GGML_TYPE_COUNT;
    }
    return ggml_get_type_traits_cpu(weight_type)->vec_dot_type;
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
