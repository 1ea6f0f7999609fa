// A client of llama.cpp's C API, built against a prebuilt libllama (not
// against loom): it loads a model, runs each prompt of the reference file
// greedily and prints one line per prompt, "ids: N N N ...", the generated
// token ids. scripts/test-prebuilt.sh runs it on ggml's libraries and on
// loom's in their place and compares the lines with the reference.
//
//   llama_greedy MODEL N_PREDICT PLUGIN_DIR PROMPT...
//
// PLUGIN_DIR is given to ggml_backend_load_all_from_path, as node-llama-cpp
// does with its folder of libraries (ggml's CPU lives in a plugin there).
// With LLAMA_GREEDY_RPC=host:port, every layer runs on that RPC server's
// first device, added through ggml's RPC reg as llama.cpp's --rpc does
// (scripts/test-ggml-rpc.sh).

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "rpc_device.h"

int main(int argc, char ** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s MODEL N_PREDICT PLUGIN_DIR PROMPT...\n", argv[0]);
        return 2;
    }
    const char * model_path = argv[1];
    const int    n_predict  = std::atoi(argv[2]);
    // Warnings and errors only (the loader's lines are many).
    llama_log_set(
        [](ggml_log_level level, const char * text, void *) {
            if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
        },
        nullptr);
    ggml_backend_load_all_from_path(argv[3]);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = 0;
    ggml_backend_dev_t remote[2] = {nullptr, nullptr};
    if (const char * rpc = std::getenv("LLAMA_GREEDY_RPC")) {
        remote[0] = add_rpc_device(rpc);
        if (remote[0] == nullptr) {
            std::fprintf(stderr, "cannot use the RPC server %s\n", rpc);
            return 1;
        }
        mp.devices      = remote;
        mp.n_gpu_layers = 999;
    }
    llama_model * model   = llama_model_load_from_file(model_path, mp);
    if (model == nullptr) {
        std::fprintf(stderr, "cannot load %s\n", model_path);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::fprintf(stderr, "devices:");
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        std::fprintf(stderr, " %s", ggml_backend_dev_name(ggml_backend_dev_get(i)));
    }
    std::fprintf(stderr, "\n");

    int status = 0;
    for (int p = 4; p < argc; ++p) {
        const std::string prompt = argv[p];
        std::vector<llama_token> tokens(prompt.size() + 8);
        const int n = llama_tokenize(vocab, prompt.c_str(), int(prompt.size()), tokens.data(), int(tokens.size()), true,
                                     false);
        if (n < 0) {
            std::fprintf(stderr, "cannot tokenize \"%s\"\n", prompt.c_str());
            return 1;
        }
        tokens.resize(size_t(n));

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx                = 512;
        cp.n_batch              = 512;
        cp.n_threads            = 2;
        cp.n_threads_batch      = 2;
        llama_context * ctx     = llama_init_from_model(model, cp);
        if (ctx == nullptr) {
            std::fprintf(stderr, "cannot create a context\n");
            return 1;
        }
        llama_sampler * smpl = llama_sampler_init_greedy();

        std::vector<llama_token> out;
        llama_batch              batch = llama_batch_get_one(tokens.data(), int(tokens.size()));
        for (int i = 0; i < n_predict; ++i) {
            if (llama_decode(ctx, batch) != 0) {
                std::fprintf(stderr, "llama_decode failed\n");
                status = 1;
                break;
            }
            llama_token id = llama_sampler_sample(smpl, ctx, -1);
            out.push_back(id);
            if (llama_vocab_is_eog(vocab, id)) break;
            batch = llama_batch_get_one(&out.back(), 1);
        }
        std::printf("ids:");
        for (llama_token id : out) std::printf(" %d", id);
        std::printf("\n");
        llama_sampler_free(smpl);
        llama_free(ctx);
    }
    llama_model_free(model);
    llama_backend_free();
    return status;
}
