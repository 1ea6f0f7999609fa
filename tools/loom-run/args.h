#pragma once

// Command-line options of loom-run. The flags follow llama.cpp's where the
// two overlap (-m, -p, -n, --temp, --top-k, --top-p, -s, -t, -c, -b, -fa,
// -ctk, -ctv, --device, --no-mmap).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ggml.h"

namespace loom_run {

struct Options {
    std::string model;                           // -m; empty: the bundled model
    std::string prompt          = "Once upon a time";
    int         n_predict       = -1;            // -1: until end of text or a full context
    float       temp            = 0.8f;          // <= 0: greedy
    int         top_k           = 40;            // <= 0: off
    float       top_p           = 0.95f;         // >= 1: off
    int64_t     seed            = -1;            // < 0: random
    int         n_threads       = 0;             // <= 0: chosen by model size (see main.cpp)
    int         n_ctx           = 0;             // 0: what the prompt and -n need, at most the model's
    int         n_batch         = 512;           // prompt tokens evaluated per graph
    ggml_type   type_k          = GGML_TYPE_F32; // KV cache element types
    ggml_type   type_v          = GGML_TYPE_F32;
    bool        flash_attn      = false;
    bool        use_mmap        = true;
    bool        use_repack      = true;
    bool        display_prompt  = true;
    bool        verbose         = false;
    bool        list_devices    = false;
    bool        help            = false;
    std::string trace_path;                      // --trace: scheduler trace (Chrome JSON)

    // --split-mode (-sm): how the layers use the devices of --device.
    //   none: every layer on the first device; layer: layers shared out
    //   (--layers-on); tensor: every layer on all the devices at once, each
    //   tensor split over them (a meta device; needs -fa).
    enum class SplitMode { none, layer, tensor };
    SplitMode split_mode = SplitMode::layer;

    // --device: names in priority order; empty: accelerators, then the CPU.
    std::vector<std::string> devices;
    // --layers-on DEV=N, in the order given.
    std::vector<std::pair<std::string, int>> layers_on;
    // -ot/--override-tensor REGEX=DEV, in the order given: a weight whose
    // name the regular expression finds (std::regex, ECMAScript, searched
    // anywhere in the name) goes to device DEV instead of its layer's; the
    // first that matches wins (llama.cpp's option, e.g. "exps=CPU").
    std::vector<std::pair<std::string, std::string>> tensor_overrides;
    // --load-backend: plugin libraries loaded before the devices are looked up.
    std::vector<std::string> backend_paths;
    // --rpc HOST:PORT,...: servers whose devices join the registry.
    std::vector<std::string> rpc_servers;
    // --rpc-backend NAME: the backend family that connects to them (its
    // ggml_backend_rpc_add_server): loom's "RPC", or a plugin's such as
    // ggml's RPC plugin hosted by --load-backend ("ggml:RPC").
    std::string rpc_backend = "RPC";
};

// Parses argv (argv[0] is skipped). Returns false with *error set on an
// unknown flag, a missing or malformed value.
bool parse_args(int argc, const char * const * argv, Options * options, std::string * error);

// The text of --help.
std::string usage(const char * program);

} // namespace loom_run
