// The backend families built into the library (registry.h: builtin_regs).
// The one place that names every concrete backend: the backend layer's
// registry calls this and includes none of them (docs/DESIGN-layers.md).

#include "backend/registry.h"
#include "ggml-cpu.h"
#ifdef LOOM_HAS_BLAS
#    include "ggml-blas.h"
#endif
#ifdef LOOM_HAS_VULKAN
#    include "ggml-vulkan.h"
#endif
#ifdef LOOM_HAS_RPC
#    include "ggml-rpc.h"
#endif

std::vector<ggml_backend_reg *> loom::builtin_regs() {
    // In order of preference. BLAS comes before the CPU, as in ggml: a
    // scheduler given the devices in registry order then has the CPU last,
    // as it requires. init_best and dev_by_type pick by type, so the CPU
    // stays their answer for CPU. Vulkan (GPU devices) comes first of all.
    std::vector<ggml_backend_reg *> regs;
#ifdef LOOM_HAS_VULKAN
    regs.push_back(ggml_backend_vk_reg());
#endif
#ifdef LOOM_HAS_BLAS
    regs.push_back(ggml_backend_blas_reg());
#endif
    regs.push_back(ggml_backend_cpu_reg());
    // The RPC family has no devices until ggml_backend_rpc_add_server adds
    // a reg per server; it is here so that its proc addresses are found.
#ifdef LOOM_HAS_RPC
    regs.push_back(ggml_backend_rpc_reg());
#endif
    return regs;
}
