// Preloaded into a program built on ggml that enumerates devices without
// asking for RPC servers (llama.cpp's test-backend-ops): after the
// program's ggml_backend_load_all, registers the RPC servers named in
// GGML_RPC_SERVERS ("host:port,host:port") through the reg named
// GGML_RPC_REG (default "RPC", ggml's RPC reg), as llama.cpp's --rpc does.
// On ggml their devices are then "RPC<n>"; on loom with ggml's RPC plugin
// hosted (GGML_BACKEND_PATH=libggml-rpc.so GGML_RPC_REG=ggml:RPC),
// "ggml:RPC<n>".
//
//   GGML_RPC_SERVERS=127.0.0.1:50100 LD_PRELOAD=libadd_rpc_servers.so test-backend-ops -b RPC0

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ggml-backend.h"

extern "C" void ggml_backend_load_all(void) {
    using load_all_t = void (*)();
    auto next        = reinterpret_cast<load_all_t>(dlsym(RTLD_NEXT, "ggml_backend_load_all"));
    if (next == nullptr) {
        std::fprintf(stderr, "add_rpc_servers: no ggml_backend_load_all after this library\n");
        std::abort();
    }
    next();
    const char * servers = std::getenv("GGML_RPC_SERVERS");
    if (servers == nullptr || *servers == '\0') {
        return;
    }
    const char *       name = std::getenv("GGML_RPC_REG");
    ggml_backend_reg_t rpc  = ggml_backend_reg_by_name(name != nullptr && *name != '\0' ? name : "RPC");
    using add_server_t     = ggml_backend_reg_t (*)(const char *);
    auto add = rpc != nullptr ? reinterpret_cast<add_server_t>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"))
                              : nullptr;
    if (add == nullptr) {
        std::fprintf(stderr, "add_rpc_servers: no RPC backend named %s is loaded\n", name != nullptr ? name : "RPC");
        std::abort();
    }
    const std::string list = servers;
    for (size_t start = 0; start < list.size();) {
        size_t end = list.find(',', start);
        end        = end == std::string::npos ? list.size() : end;
        const std::string endpoint = list.substr(start, end - start);
        ggml_backend_reg_t reg     = add(endpoint.c_str());
        if (reg == nullptr) {
            std::fprintf(stderr, "add_rpc_servers: cannot reach %s\n", endpoint.c_str());
            std::abort();
        }
        ggml_backend_register(reg);
        start = end + 1;
    }
}
