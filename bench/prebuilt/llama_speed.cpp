// Prompt and generation speed of a prebuilt libllama, whichever ggml the
// loader gives it (bench/prebuilt_vs_ggml.sh builds this against npm's
// libllama and runs it on ggml's libraries and on loom's in their place).
// Prints one JSON line: {"pp": prompt tokens/s, "tg": generation tokens/s,
// "devices": [...]}.
//
//   llama_speed MODEL N_PROMPT N_GEN THREADS PLUGIN_DIR   (LLAMA_SPEED_NO_REPACK=1: no repacked weights;
//                                                       LLAMA_SPEED_RPC=host:port: every layer on that server)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "../../tests/prebuilt/rpc_device.h"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
} // namespace

int main(int argc, char ** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: %s MODEL N_PROMPT N_GEN THREADS PLUGIN_DIR\n", argv[0]);
        return 2;
    }
    const int n_prompt = std::atoi(argv[2]), n_gen = std::atoi(argv[3]), n_threads = std::atoi(argv[4]);
    llama_log_set(
        [](ggml_log_level level, const char * text, void *) {
            if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
        },
        nullptr);
    ggml_backend_load_all_from_path(argv[5]);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = 0;
    // LLAMA_SPEED_NO_REPACK=1: weights stay in ggml's layout (no extra
    // buffer types such as CPU_REPACK), on either library.
    if (const char * e = std::getenv("LLAMA_SPEED_NO_REPACK"); e != nullptr && e[0] == '1') mp.use_extra_bufts = false;
    ggml_backend_dev_t remote[2] = {nullptr, nullptr};
    if (const char * rpc = std::getenv("LLAMA_SPEED_RPC")) {
        if ((remote[0] = add_rpc_device(rpc)) == nullptr) {
            std::fprintf(stderr, "cannot use the RPC server %s\n", rpc);
            return 1;
        }
        mp.devices      = remote;
        mp.n_gpu_layers = 999;
    }
    llama_model * model   = llama_model_load_from_file(argv[1], mp);
    if (model == nullptr) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx                = uint32_t(n_prompt + n_gen + 16);
    cp.n_batch              = 512;
    cp.n_ubatch             = 512;
    cp.n_threads            = n_threads;
    cp.n_threads_batch      = n_threads;
    llama_context * ctx     = llama_init_from_model(model, cp);
    if (ctx == nullptr) return 1;

    // A prompt of ordinary tokens (past the first few, the special ones).
    std::vector<llama_token> prompt(static_cast<size_t>(n_prompt));
    for (int i = 0; i < n_prompt; ++i) prompt[size_t(i)] = llama_token(3 + (i * 7919) % (n_vocab - 3));
    auto t0 = std::chrono::steady_clock::now();
    for (int at = 0; at < n_prompt; at += 512) {
        const int n = std::min(512, n_prompt - at);
        if (llama_decode(ctx, llama_batch_get_one(prompt.data() + at, n)) != 0) return 1;
    }
    // (computations may still run on an asynchronous device, a remote one)
    llama_synchronize(ctx);
    const double pp_s = seconds_since(t0);

    llama_sampler * smpl = llama_sampler_init_greedy();
    llama_token     id   = llama_sampler_sample(smpl, ctx, -1);
    t0                   = std::chrono::steady_clock::now();
    for (int i = 0; i < n_gen; ++i) {
        if (llama_decode(ctx, llama_batch_get_one(&id, 1)) != 0) return 1;
        id = llama_sampler_sample(smpl, ctx, -1);
    }
    llama_synchronize(ctx);
    const double tg_s = seconds_since(t0);

    std::printf("{\"pp\": %.2f, \"tg\": %.2f, \"devices\": [", n_prompt / pp_s, n_gen / tg_s);
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        std::printf("%s\"%s\"", i ? ", " : "", ggml_backend_dev_description(ggml_backend_dev_get(i)));
    }
    std::printf("]}\n");
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
