#pragma once

// The first device of the RPC server at endpoint, added through ggml's RPC
// reg as llama.cpp's --rpc does (the reg must be loaded: ggml's RPC plugin,
// or loom's library); NULL when it cannot be used. For programs built
// against npm's prebuilt libraries (ggml's API only).

#include "ggml-backend.h"

inline ggml_backend_dev_t add_rpc_device(const char * endpoint) {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    using add_server_t     = ggml_backend_reg_t (*)(const char *);
    auto add               = reg != nullptr ? reinterpret_cast<add_server_t>(
                                    ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server"))
                                            : nullptr;
    ggml_backend_reg_t server = add != nullptr ? add(endpoint) : nullptr;
    if (server == nullptr || ggml_backend_reg_dev_count(server) == 0) {
        return nullptr;
    }
    ggml_backend_register(server);
    return ggml_backend_reg_dev_get(server, 0);
}
