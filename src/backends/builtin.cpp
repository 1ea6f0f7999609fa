// The backend families built into the library (registry.h: builtin_regs).
// The one place that names every concrete backend: the backend layer's
// registry calls this and includes none of them (docs/DESIGN-layers.md).

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/registry.h"
#include "core/common.h"
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
    // Listed only with a device to use (ggml_backend_vk_reg() answers
    // either way): where no GPU can be used, a program that asks the
    // registry which GPU family it was built with (node-llama-cpp's
    // getGpuType, which takes a listed "Vulkan" reg for one) sees what a
    // CPU-only ggml build shows.
    if (ggml_backend_reg_dev_count(ggml_backend_vk_reg()) > 0) {
        regs.push_back(ggml_backend_vk_reg());
    }
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

void loom::builtin_from_environment() {
#ifdef LOOM_HAS_RPC
    // LOOM_RPC_SERVERS=host:port[,host:port...]: each server's devices join
    // the registry as ggml_backend_rpc_add_server would add them, so that
    // programs that know nothing of RPC (test-backend-ops, llama-bench, a
    // ggml example) can run on remote devices. A server that cannot be
    // reached is logged and left out.
    const char * list = std::getenv("LOOM_RPC_SERVERS");
    if (list == nullptr) {
        return;
    }
    std::string all(list);
    for (size_t start = 0; start <= all.size();) {
        const size_t end = std::min(all.find(',', start), all.size());
        std::string  endpoint = all.substr(start, end - start);
        // Spaces around an entry ("a:1, b:2") are not part of it.
        endpoint.erase(0, endpoint.find_first_not_of(" \t"));
        endpoint.erase(endpoint.find_last_not_of(" \t") + 1);
        if (!endpoint.empty() && ggml_backend_rpc_add_server(endpoint.c_str()) == nullptr) {
            LOOM_LOG_WARN("LOOM_RPC_SERVERS: cannot reach %s; its devices are left out\n", endpoint.c_str());
        }
        start = end + 1;
    }
#endif
}
