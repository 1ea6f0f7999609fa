#include "args.h"

#include "devices.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace loom_run {

namespace {

// Whole-string number parsing: "12x" or "" is an error, not 12 or 0.
template <typename T> bool parse_number(std::string_view text, T * out) {
    if (text.empty()) {
        return false;
    }
    const char * first = text.data();
    const char * last  = text.data() + text.size();
    if constexpr (std::is_floating_point_v<T>) {
        // from_chars for floating point is not in every standard library we
        // build with; strtod on a NUL-terminated copy is.
        std::string copy(text);
        char *      end = nullptr;
        errno           = 0;
        const double v  = std::strtod(copy.c_str(), &end);
        if (end != copy.c_str() + copy.size() || errno == ERANGE) {
            return false;
        }
        *out = T(v);
        return true;
    } else {
        auto [ptr, ec] = std::from_chars(first, last, *out);
        return ec == std::errc() && ptr == last;
    }
}

bool parse_cache_type(std::string_view text, ggml_type * out) {
    struct Name {
        const char * name;
        ggml_type    type;
    };
    static const Name names[] = {
        {"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"bf16", GGML_TYPE_BF16},
        {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0},
    };
    for (const Name & n : names) {
        if (text == n.name) {
            *out = n.type;
            return true;
        }
    }
    return false;
}

} // namespace

bool parse_args(int argc, const char * const * argv, Options * o, std::string * error) {
    auto fail = [&](const std::string & message) {
        *error = message;
        return false;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        // The value of a flag that takes one: the next argument.
        auto value = [&](std::string_view * out) {
            if (i + 1 >= argc) {
                return false;
            }
            *out = argv[++i];
            return true;
        };
        std::string_view v;
        auto need = [&]() {
            if (!value(&v)) {
                *error = "option " + std::string(arg) + " needs a value";
                return false;
            }
            return true;
        };
        auto bad = [&](const char * what) {
            return fail("option " + std::string(arg) + ": '" + std::string(v) + "' is not " + what);
        };

        if (arg == "-h" || arg == "--help") {
            o->help = true;
        } else if (arg == "-m" || arg == "--model") {
            if (!need()) return false;
            o->model = v;
        } else if (arg == "-p" || arg == "--prompt") {
            if (!need()) return false;
            o->prompt = v;
        } else if (arg == "-n" || arg == "--n-predict") {
            if (!need()) return false;
            if (!parse_number(v, &o->n_predict) || o->n_predict < -1) return bad("a number of tokens (-1: no limit)");
        } else if (arg == "--temp") {
            if (!need()) return false;
            if (!parse_number(v, &o->temp) || !(o->temp == o->temp)) return bad("a temperature");
        } else if (arg == "--top-k") {
            if (!need()) return false;
            if (!parse_number(v, &o->top_k)) return bad("an integer");
        } else if (arg == "--top-p") {
            if (!need()) return false;
            if (!parse_number(v, &o->top_p) || !(o->top_p >= 0.0f)) return bad("a probability");
        } else if (arg == "-s" || arg == "--seed") {
            if (!need()) return false;
            if (!parse_number(v, &o->seed) || o->seed > int64_t(UINT32_MAX)) return bad("a seed (0..4294967295, -1: random)");
        } else if (arg == "-t" || arg == "--threads") {
            if (!need()) return false;
            if (!parse_number(v, &o->n_threads) || o->n_threads < 1 || o->n_threads > 1024) return bad("a thread count");
        } else if (arg == "-c" || arg == "--ctx-size") {
            if (!need()) return false;
            if (!parse_number(v, &o->n_ctx) || o->n_ctx < 0) return bad("a context size (0: automatic)");
        } else if (arg == "-b" || arg == "--batch-size") {
            if (!need()) return false;
            if (!parse_number(v, &o->n_batch) || o->n_batch < 1) return bad("a batch size");
        } else if (arg == "-ctk" || arg == "--cache-type-k") {
            if (!need()) return false;
            if (!parse_cache_type(v, &o->type_k)) return bad("a cache type (f32, f16, bf16, q8_0, q4_0)");
        } else if (arg == "-ctv" || arg == "--cache-type-v") {
            if (!need()) return false;
            if (!parse_cache_type(v, &o->type_v)) return bad("a cache type (f32, f16, bf16, q8_0, q4_0)");
        } else if (arg == "-fa" || arg == "--flash-attn") {
            o->flash_attn = true;
        } else if (arg == "--no-mmap") {
            o->use_mmap = false;
        } else if (arg == "--no-repack") {
            o->use_repack = false;
        } else if (arg == "--no-display-prompt") {
            o->display_prompt = false;
        } else if (arg == "-v" || arg == "--verbose") {
            o->verbose = true;
        } else if (arg == "--list-devices") {
            o->list_devices = true;
        } else if (arg == "--trace") {
            if (!need()) return false;
            o->trace_path = v;
        } else if (arg == "-dev" || arg == "--device") {
            if (!need()) return false;
            o->devices = split_list(v);
            if (o->devices.empty()) return bad("a list of device names");
        } else if (arg == "--layers-on") {
            if (!need()) return false;
            // DEV=N, several separated by commas or given in several options.
            for (const std::string & item : split_list(v)) {
                const size_t eq = item.rfind('=');
                int          n  = 0;
                if (eq == std::string::npos || eq == 0 || !parse_number(std::string_view(item).substr(eq + 1), &n) ||
                    n < 0) {
                    return bad("DEVICE=LAYERS");
                }
                o->layers_on.emplace_back(item.substr(0, eq), n);
            }
        } else if (arg == "-ot" || arg == "--override-tensor") {
            if (!need()) return false;
            // REGEX=DEV, several separated by commas or given in several options.
            for (const std::string & item : split_list(v)) {
                const size_t eq = item.rfind('=');
                if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
                    return bad("REGEX=DEVICE");
                }
                o->tensor_overrides.emplace_back(item.substr(0, eq), item.substr(eq + 1));
            }
        } else if (arg == "-sm" || arg == "--split-mode") {
            if (!need()) return false;
            if (v == "none") {
                o->split_mode = Options::SplitMode::none;
            } else if (v == "layer") {
                o->split_mode = Options::SplitMode::layer;
            } else if (v == "tensor") {
                o->split_mode = Options::SplitMode::tensor;
            } else {
                return bad("none, layer or tensor");
            }
        } else if (arg == "--load-backend") {
            if (!need()) return false;
            o->backend_paths.emplace_back(v);
        } else if (arg == "--rpc") {
            if (!need()) return false;
            for (const std::string & endpoint : split_list(v)) {
                if (endpoint.rfind(':') == std::string::npos || endpoint.back() == ':') {
                    return bad("HOST:PORT[,HOST:PORT...]");
                }
                o->rpc_servers.push_back(endpoint);
            }
            if (o->rpc_servers.empty()) return bad("HOST:PORT[,HOST:PORT...]");
        } else if (arg == "--rpc-backend") {
            if (!need()) return false;
            o->rpc_backend = v;
        } else {
            return fail("unknown option '" + std::string(arg) + "' (see --help)");
        }
    }
    return true;
}

std::string usage(const char * program) {
    std::string u = "usage: ";
    u += program;
    u += R"( [options]

Runs a llama-architecture GGUF model: evaluates the prompt, then generates
text, which goes to standard output; everything else goes to standard error.
With no options it runs the bundled model on "Once upon a time".

  -m, --model FILE         GGUF model (default: the bundled stories260k model)
  -p, --prompt TEXT        prompt (default: "Once upon a time")
  -n, --n-predict N        tokens to generate (default: -1, until the end of
                           text or a full context)
      --temp T             temperature; 0 picks the most likely token (default: 0.8)
      --top-k K            sample among the K most likely tokens, 0 = all (default: 40)
      --top-p P            sample among the most likely tokens whose probabilities
                           add up to P, 1 = all (default: 0.95)
  -s, --seed S             random seed, -1 = random (default: -1)
  -t, --threads N          CPU threads (default: one per hardware thread, at most
                           one per 4 M parameters)
  -c, --ctx-size N         context size in tokens (default: prompt + N, at most
                           the model's, or 4096 when -n is -1)
  -b, --batch-size N       prompt tokens evaluated per graph (default: 512)
  -ctk, --cache-type-k T   KV cache K type: f32, f16, bf16, q8_0, q4_0 (default: f32)
  -ctv, --cache-type-v T   KV cache V type: f32, f16, bf16; q8_0, q4_0 with -fa (default: f32)
  -fa, --flash-attn        attention with ggml_flash_attn_ext
      --no-mmap            copy CPU weights into memory instead of mapping the file
      --no-repack          keep CPU Q4_0/Q8_0 matrices in the file's layout (no CPU_REPACK buffer)
  -dev, --device LIST      devices in priority order, comma-separated (for example
                           TestDev0,cpu); the CPU is added last when missing
                           (default: accelerators such as BLAS, then the CPU)
  -sm, --split-mode MODE   how layers use the devices: none (all on the first
                           device), layer (shared out, the default; see
                           --layers-on), tensor (every tensor split over the
                           devices other than the CPU, attention by heads and
                           the feed-forward network by rows; needs -fa)
      --layers-on DEV=N    put N layers on device DEV, counted from the first layer
                           in the order of --device; layers left over run on the
                           CPU (default: the layers shared evenly by the listed
                           devices other than the CPU and accelerators)
  -ot, --override-tensor REGEX=DEV
                           put the weights whose names REGEX finds on device DEV
                           instead of their layer's (for example exps=CPU: the
                           experts of a mixture on the CPU); comma-separated or
                           repeated, the first that matches wins
      --load-backend PATH  load a backend plugin library (repeatable)
      --rpc SERVERS        remote devices: HOST:PORT of loom-rpc-server, comma-separated;
                           their devices come first in the default list and take part
                           in --device and --layers-on by name (RPC[HOST:PORT]NAME);
                           LOOM_RPC_TOKEN and the LOOM_RPC_TLS_* variables apply
      --rpc-backend NAME   the backend that connects to the --rpc servers: RPC (loom's
                           client, the default) or ggml:RPC (ggml's RPC plugin, loaded
                           with --load-backend libggml-rpc.so; its devices are ggml:RPC<n>)
      --list-devices       print the devices and exit
      --trace FILE.json    write the scheduler's trace (open it in Perfetto)
      --no-display-prompt  print only the generated text
  -v, --verbose            print loom's debug messages
  -h, --help               print this text
)";
    return u;
}

} // namespace loom_run
