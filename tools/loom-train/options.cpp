#include "options.h"

#include "devices.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace loom_train {

namespace {

// Whole-string number parsing: "12x" or "" is an error, not 12 or 0.
template <typename T> bool parse_number(std::string_view text, T * out) {
    if (text.empty()) {
        return false;
    }
    if constexpr (std::is_floating_point_v<T>) {
        std::string  copy(text);
        char *       end = nullptr;
        errno            = 0;
        const double v   = std::strtod(copy.c_str(), &end);
        if (end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(v)) {
            return false;
        }
        *out = T(v);
        return true;
    } else {
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
        return ec == std::errc() && ptr == text.data() + text.size();
    }
}

} // namespace

bool parse_args(int argc, const char * const * argv, Options * o, std::string * error) {
    auto fail = [&](const std::string & message) {
        *error = message;
        return false;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        std::string_view       v;
        auto                   need = [&]() {
            if (i + 1 >= argc) {
                *error = "option " + std::string(arg) + " needs a value";
                return false;
            }
            v = argv[++i];
            return true;
        };
        auto bad = [&](const char * what) {
            return fail("option " + std::string(arg) + ": '" + std::string(v) + "' is not " + what);
        };

        if (arg == "-h" || arg == "--help") {
            o->help = true;
        } else if (arg == "--epochs") {
            if (!need()) return false;
            if (!parse_number(v, &o->epochs) || o->epochs < 1) return bad("a number of epochs (at least 1)");
        } else if (arg == "-b" || arg == "--batch") {
            if (!need()) return false;
            if (!parse_number(v, &o->batch) || o->batch < 1 || o->batch > (int64_t(1) << 20)) return bad("a batch size");
        } else if (arg == "--lr") {
            if (!need()) return false;
            if (!parse_number(v, &o->lr) || !(o->lr > 0.0f)) return bad("a positive learning rate");
        } else if (arg == "--hidden") {
            if (!need()) return false;
            if (!parse_number(v, &o->hidden) || o->hidden < 1 || o->hidden > 65536) return bad("a layer width (1..65536)");
        } else if (arg == "--layers") {
            if (!need()) return false;
            if (!parse_number(v, &o->layers) || o->layers < 1 || o->layers > 64) return bad("a number of hidden layers (1..64)");
        } else if (arg == "--classes") {
            if (!need()) return false;
            if (!parse_number(v, &o->classes) || o->classes < 2 || o->classes > 64) return bad("a number of classes (2..64)");
        } else if (arg == "--points") {
            if (!need()) return false;
            if (!parse_number(v, &o->points) || o->points < 1 || o->points > (int64_t(1) << 24)) return bad("a number of points");
        } else if (arg == "--optimizer") {
            if (!need()) return false;
            if (v == "adamw") {
                o->sgd = false;
            } else if (v == "sgd") {
                o->sgd = true;
            } else {
                return bad("adamw or sgd");
            }
        } else if (arg == "-s" || arg == "--seed") {
            if (!need()) return false;
            if (!parse_number(v, &o->seed)) return bad("a seed (0..4294967295)");
        } else if (arg == "-t" || arg == "--threads") {
            if (!need()) return false;
            if (!parse_number(v, &o->n_threads) || o->n_threads < 1 || o->n_threads > 1024) return bad("a thread count");
        } else if (arg == "--val-split") {
            if (!need()) return false;
            if (!parse_number(v, &o->val_split) || !(o->val_split >= 0.0f && o->val_split < 1.0f)) {
                return bad("a fraction in [0, 1)");
            }
        } else if (arg == "-dev" || arg == "--device") {
            if (!need()) return false;
            o->devices = loom_run::split_list(v);
            if (o->devices.empty()) return bad("a list of device names");
        } else if (arg == "-o" || arg == "--output") {
            if (!need()) return false;
            if (v.empty()) return bad("a file name");
            o->output = v;
        } else if (arg == "--eval") {
            if (!need()) return false;
            if (v.empty()) return bad("a file name");
            o->eval = v;
        } else if (arg == "--no-progress") {
            o->progress = false;
        } else {
            return fail("unknown option '" + std::string(arg) + "' (see --help)");
        }
    }
    if (o->eval.empty() && !o->help) {
        // ggml_opt_epoch trains and evaluates whole batches.
        const int64_t n_batches = o->points / o->batch;
        const int64_t n_train   = n_batches - int64_t(std::llround(double(o->val_split) * double(n_batches)));
        if (n_train < 1) {
            return fail("--points " + std::to_string(o->points) + " with --batch " + std::to_string(o->batch) +
                        " and --val-split " + std::to_string(o->val_split) + " leaves no training batch");
        }
    }
    return true;
}

std::string usage(const char * program) {
    std::string u = "usage: ";
    u += program;
    u += R"( [options]

Trains an MLP (ReLU hidden layers, cross-entropy loss) to tell apart the
classes of interleaved spirals it generates, with ggml-opt on the backend
scheduler, and prints the training and validation loss and accuracy of
every epoch. With --eval it loads a trained model and reports its loss and
accuracy on the data it was trained with.

  --epochs N            epochs (default: 40)
  -b, --batch N         points per batch and optimizer step (default: 32)
  --lr F                learning rate (default: 0.01)
  --optimizer NAME      adamw or sgd (default: adamw)
  --hidden N            units per hidden layer (default: 32)
  --layers N            hidden layers (default: 2)
  --classes N           spirals (default: 3)
  --points N            points in all; whole batches are used (default: 1536)
  --val-split F         fraction of the batches held out for validation (default: 0.125)
  -s, --seed N          seed of the data and the initial weights (default: 42)
  -t, --threads N       CPU threads (default: one per hardware thread)
  -dev, --device LIST   devices in priority order, comma-separated; the first
                        holds the weights, the CPU is added last when missing
                        (default: accelerators such as BLAS, then the CPU)
  -o, --output FILE     write the trained model as GGUF
  --eval FILE           evaluate the model in FILE (a GGUF file loom-train wrote)
  --no-progress         no progress bar
  -h, --help            print this text

Exit status: 0 on success, 1 when a model cannot be loaded or written or a
device cannot start, 2 for a malformed command line.
)";
    return u;
}

} // namespace loom_train
