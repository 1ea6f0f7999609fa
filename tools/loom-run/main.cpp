// loom-run: runs a llama-architecture GGUF model with loom. Generated text
// goes to standard output; progress, statistics and errors to standard error.
// Exit status: 0 on success, 1 when the model cannot be loaded or run, 2 for
// a malformed command line.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <random>
#include <regex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tensor_split.h"
#include "args.h"
#include "devices.h"
#include "ggml-backend.h"
#include "model.h"
#include "sampler.h"
#include "session.h"
#include "tokenizer.h"

namespace {

using loom_run::Options;
using Clock = std::chrono::steady_clock;

struct LogState {
    bool           verbose = false;
    ggml_log_level last    = GGML_LOG_LEVEL_NONE;
};

// loom's messages: warnings and errors always, the rest with -v.
void log_to_stderr(ggml_log_level level, const char * text, void * user_data) {
    auto * st = static_cast<LogState *>(user_data);
    if (level != GGML_LOG_LEVEL_CONT) {
        st->last = level;
    }
    if (st->verbose || st->last >= GGML_LOG_LEVEL_WARN) {
        std::fputs(text, stderr);
    }
}

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double mib(size_t bytes) {
    return double(bytes) / (1024.0 * 1024.0);
}

bool file_exists(const std::string & path) {
    return ::access(path.c_str(), R_OK) == 0;
}

// The bundled model: the source tree's copy, or one beside the executable.
std::string default_model() {
#ifdef LOOM_DEFAULT_MODEL
    if (file_exists(LOOM_DEFAULT_MODEL)) {
        return LOOM_DEFAULT_MODEL;
    }
#endif
    char    exe[4096];
    ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n]          = '\0';
        std::string dir = exe;
        dir             = dir.substr(0, dir.rfind('/') + 1);
        for (const char * rel : {"stories260k-f32.gguf", "../tests/data/stories260k-f32.gguf",
                                 "../../tests/data/stories260k-f32.gguf", "../share/loom/stories260k-f32.gguf"}) {
            if (file_exists(dir + rel)) {
                return dir + rel;
            }
        }
    }
    return "stories260k-f32.gguf";
}

// A bar on standard error, redrawn in place on a terminal; elsewhere only
// the finished bar is printed, so logs do not fill with redraws.
class ProgressBar {
  public:
    ProgressBar() : tty_(::isatty(STDERR_FILENO) != 0) {}

    void update(size_t done, size_t total) {
        const int percent = total == 0 ? 100 : int(done * 100 / total);
        if (percent == last_ || (!tty_ && percent < 100)) {
            return;
        }
        last_              = percent;
        constexpr int WIDTH = 30;
        const int     fill  = percent * WIDTH / 100;
        std::fprintf(stderr, "%sloading [%s%s] %3d%% %8.1f MiB", tty_ ? "\r" : "",
                     std::string(size_t(fill), '#').c_str(), std::string(size_t(WIDTH - fill), ' ').c_str(), percent,
                     mib(total));
        if (percent == 100) {
            std::fputc('\n', stderr);
        }
        std::fflush(stderr);
    }

  private:
    bool tty_;
    int  last_ = -1;
};

// "0-2 on TestDev0, 3-4 on CPU"
std::string placement_text(const loom_run::Model & model, const loom_run::Backends & backends) {
    std::string     s;
    const auto &    dev = model.layer_devices();
    size_t          i   = 0;
    while (i < dev.size()) {
        size_t j = i;
        while (j + 1 < dev.size() && dev[j + 1] == dev[i]) {
            ++j;
        }
        s += s.empty() ? "" : ", ";
        s += i == j ? std::to_string(i) : std::to_string(i) + "-" + std::to_string(j);
        s += std::string(" on ") + backends.name(size_t(dev[i]));
        i = j + 1;
    }
    return s;
}

int run(const Options & o) {
    std::string error;
    auto        fail = [&](const std::string & what) {
        std::fprintf(stderr, "loom-run: error: %s\n", what.c_str());
        return 1;
    };

    if (o.list_devices) {
        ggml_backend_load_all();
        for (const std::string & path : o.backend_paths) {
            if (ggml_backend_load(path.c_str()) == nullptr) {
                return fail("cannot load the backend plugin " + path);
            }
        }
        std::vector<ggml_backend_dev_t> remote;
        if (!loom_run::add_rpc_servers(o.rpc_servers, o.rpc_backend, &remote, &error)) {
            return fail(error);
        }
        std::fprintf(stderr, "devices:\n%s", loom_run::describe_devices().c_str());
        return 0;
    }

    // Without --device, the devices named by --layers-on come first.
    std::vector<std::string> names = o.devices;
    if (names.empty()) {
        for (const auto & [name, n] : o.layers_on) {
            (void) n;
            names.push_back(name);
        }
    }
    auto backends = loom_run::Backends::create(names, o.backend_paths, o.n_threads, &error, o.rpc_servers,
                                                  o.rpc_backend);
    if (!backends) {
        return fail(error);
    }

    loom_run::TensorSplit tensor_split;
    if (o.split_mode == loom_run::Options::SplitMode::tensor) {
        if (!o.flash_attn) {
            return fail("--split-mode tensor needs flash attention (-fa)");
        }
        if (!backends->combine_for_tensor_split(loom_run::tensor_split_state, &tensor_split, &error)) {
            return fail(error);
        }
        tensor_split.n_members = backends->n_members();
    }

    const std::string path = o.model.empty() ? default_model() : o.model;
    std::fprintf(stderr, "loom-run: model %s\n", path.c_str());

    ProgressBar          bar;
    loom_run::LoadOptions lo;
    lo.use_mmap     = o.use_mmap;
    lo.use_repack   = o.use_repack;
    lo.progress     = [&](size_t done, size_t total) { bar.update(done, total); };
    lo.on_hparams   = [&](const loom_run::HParams & hp) { tensor_split.set_hparams(hp); };
    lo.place_layers = [&](uint32_t n_layer, std::vector<int> * layer_device, std::string * err) {
        if (o.split_mode == loom_run::Options::SplitMode::none) {
            layer_device->assign(n_layer, 0);
            return true;
        }
        return loom_run::assign_layers(*backends, int(n_layer), o.layers_on, layer_device, err);
    };
    if (!o.tensor_overrides.empty() && o.split_mode == loom_run::Options::SplitMode::tensor) {
        return fail("--override-tensor places whole tensors; it cannot be combined with --split-mode tensor");
    }
    for (const auto & [pattern, name] : o.tensor_overrides) {
        const int d = backends->find(name);
        if (d < 0) {
            return fail("--override-tensor names device '" + name + "', which is not among the devices in use");
        }
        try {
            lo.tensor_overrides.emplace_back(std::regex(pattern), d);
        } catch (const std::regex_error & e) {
            return fail("--override-tensor: '" + pattern + "' is not a regular expression (" + e.what() + ")");
        }
    }
    const auto t_load = Clock::now();
    auto       model  = loom_run::Model::load(path, *backends, lo, &error);
    if (!model) {
        return fail(error);
    }
    const double load_ms = ms_since(t_load);

    // Threads: as asked, or one per hardware thread, but no more than one
    // per 4 M parameters. Every op of a graph ends at a barrier of all
    // threads; for a tiny model the barriers cost more than the work they
    // share (much more where other processes hold the cores).
    int n_threads = o.n_threads;
    if (n_threads <= 0) {
        const size_t by_size = std::max<size_t>(1, model->n_params() / (size_t(4) << 20));
        n_threads = int(std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), by_size));
        backends->set_n_threads(n_threads);
    }

    loom_run::Tokenizer tokenizer;
    if (!tokenizer.load(model->gguf(), &error)) {
        return fail(path + ": " + error);
    }
    const loom_run::HParams & hp = model->hparams();
    if (uint32_t(tokenizer.n_vocab()) != hp.n_vocab) {
        return fail(path + ": the vocabulary has " + std::to_string(tokenizer.n_vocab()) +
                    " tokens, the embedding matrix " + std::to_string(hp.n_vocab));
    }
    const std::vector<int32_t> prompt = tokenizer.tokenize(o.prompt, true);
    if (prompt.empty()) {
        return fail("the prompt gives no tokens");
    }

    // Context: what this run needs, at most what the model was trained for.
    uint32_t n_ctx = uint32_t(o.n_ctx);
    if (n_ctx == 0) {
        const uint64_t want = o.n_predict < 0 ? 4096 : uint64_t(prompt.size()) + uint64_t(o.n_predict);
        n_ctx               = uint32_t(std::min<uint64_t>(std::max<uint64_t>(want, 1), hp.n_ctx_train));
    }
    if (prompt.size() > n_ctx) {
        return fail("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                    std::to_string(n_ctx) + " (see -c)");
    }

    loom_run::SessionOptions so;
    so.n_ctx      = n_ctx;
    so.n_batch    = uint32_t(o.n_batch);
    so.type_k     = o.type_k;
    so.type_v     = o.type_v;
    so.flash_attn = o.flash_attn;
    so.trace_path = o.trace_path;
    auto session  = loom_run::Session::create(*model, *backends, so, &error);
    if (!session) {
        return fail(error);
    }

    std::fprintf(stderr,
                 "loom-run: %s: %u layers, %u embedding, %u heads (%u KV), %u vocabulary, %.2f M parameters; "
                 "loaded in %.1f ms%s\n",
                 model->name().empty() ? "model" : model->name().c_str(), hp.n_layer, hp.n_embd, hp.n_head,
                 hp.n_head_kv, hp.n_vocab, double(model->n_params()) / 1e6, load_ms,
                 model->mapped() ? " (CPU weights mapped)" : "");
    if (!o.tensor_overrides.empty()) {
        std::fprintf(stderr, "loom-run: %zu weights placed by --override-tensor\n", model->n_overridden());
    }
    if (model->n_repacked() > 0) {
        std::fprintf(stderr, "loom-run: %zu matrices repacked for the CPU (CPU_REPACK)\n", model->n_repacked());
    }
    std::fprintf(stderr, "loom-run: layers %s; context %u tokens; threads %d\n",
                 placement_text(*model, *backends).c_str(), n_ctx, n_threads);
    const std::string kernels = loom_run::backend_feature(backends->device(backends->cpu_index()), "KERNELS");
    if (!kernels.empty()) {
        std::fprintf(stderr, "loom-run: CPU kernel table %s\n", kernels.c_str());
    }

    loom_run::SamplerParams sp;
    sp.temp  = o.temp;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.seed  = o.seed >= 0 ? uint32_t(o.seed) : std::random_device{}();
    loom_run::Sampler sampler(sp);
    if (o.temp > 0.0f) {
        std::fprintf(stderr, "loom-run: sampling with temperature %.2f, top-k %d, top-p %.2f, seed %u\n", double(o.temp),
                     o.top_k, double(o.top_p), sp.seed);
    } else {
        std::fprintf(stderr, "loom-run: greedy sampling\n");
    }

    if (o.display_prompt) {
        std::fputs(o.prompt.c_str(), stdout);
        std::fflush(stdout);
    }

    // Prompt, in one batch (or several of -b tokens).
    std::vector<float> logits;
    const auto         t_prompt = Clock::now();
    if (!session->eval(prompt, &logits, &error)) {
        return fail(error);
    }
    const double prompt_ms     = ms_since(t_prompt);
    const int    prompt_splits = session->n_splits();

    // Generation: sample, print, evaluate the sampled token, repeat.
    int         n_generated = 0;
    int         n_evals     = 0;
    double      gen_ms      = 0;
    int         gen_splits  = 0;
    std::string stop        = "the token limit";
    while (o.n_predict < 0 || n_generated < o.n_predict) {
        const int32_t id = sampler.sample(logits);
        ++n_generated;
        if (id == tokenizer.eos()) {
            stop = "the end of the text";
            break;
        }
        const std::string piece = tokenizer.piece(id);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        if (o.n_predict >= 0 && n_generated >= o.n_predict) {
            break;
        }
        if (session->n_past() >= session->n_ctx()) {
            stop = "a full context";
            break;
        }
        const auto t = Clock::now();
        if (!session->eval(std::span<const int32_t>(&id, 1), &logits, &error)) {
            std::fputc('\n', stdout);
            return fail(error);
        }
        gen_ms += ms_since(t);
        ++n_evals;
        gen_splits = session->n_splits();
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);

    // Statistics.
    std::fprintf(stderr, "\nloom-run: stopped at %s\n", stop.c_str());
    std::fprintf(stderr, "loom-run: prompt     %5zu tokens in %9.2f ms (%9.1f tokens/s)\n", prompt.size(), prompt_ms,
                 prompt_ms > 0 ? double(prompt.size()) * 1000.0 / prompt_ms : 0.0);
    const double gen_rate = gen_ms > 0 ? double(n_evals) * 1000.0 / gen_ms : 0.0;
    std::fprintf(stderr,
                 "loom-run: generation %5d tokens in %9.2f ms (%9.1f tokens/s, %.1f GB/s of weights), %d tokens "
                 "generated\n",
                 n_evals, gen_ms, gen_rate, gen_rate * double(model->token_bytes()) / 1e9, n_generated);
    std::fprintf(stderr, "loom-run: memory (MiB)   %10s %10s %10s\n", "weights", "KV cache", "compute");
    for (size_t d = 0; d < backends->size(); ++d) {
        std::fprintf(stderr, "loom-run:   %-12s %10.2f %10.2f %10.2f\n", backends->name(d), mib(model->weight_bytes(d)),
                     mib(session->kv_bytes(d)), mib(session->compute_bytes(d)));
    }
    size_t resident = 0, huge = 0;
    if (model->mapped_pages(&resident, &huge) && resident > 0) {
        std::fprintf(stderr, "loom-run: mapped weights: %.2f MiB in memory, %.2f MiB of it on 2 MiB pages%s\n",
                     mib(resident), mib(huge),
                     huge * 2 < resident ? " (the page cache holds the file in small pages, which generation may read "
                                           "more slowly; --no-mmap copies the weights onto 2 MiB pages)"
                                         : "");
    }
    std::fprintf(stderr, "loom-run: graph splits: prompt %d, generation %d\n", prompt_splits, gen_splits);
    ggml_backend_sched_t sched = session->sched();
    loom_sched_stats     stats{};
    loom_sched_get_stats(sched, &stats);
    std::fprintf(stderr, "loom-run: scheduler: %llu graphs placed, %llu reused a placement, %.2f MiB copied\n",
                 stats.n_plans, stats.n_reused, mib(stats.bytes_copied));
    if (!o.trace_path.empty()) {
        if (!session->write_trace()) {
            return fail("cannot write the trace to " + o.trace_path);
        }
        std::fprintf(stderr, "loom-run: trace written to %s\n", o.trace_path.c_str());
    }
    return 0;
}

} // namespace

int main(int argc, char ** argv) {
    Options     options;
    std::string error;
    if (!loom_run::parse_args(argc, argv, &options, &error)) {
        std::fprintf(stderr, "loom-run: %s\n", error.c_str());
        return 2;
    }
    if (options.help) {
        std::fputs(loom_run::usage(argv[0]).c_str(), stdout);
        return 0;
    }
    LogState log_state;
    log_state.verbose = options.verbose;
    ggml_log_set(log_to_stderr, &log_state);
    try {
        const int rc = run(options);
        ggml_log_set(nullptr, nullptr);
        return rc;
    } catch (const std::exception & e) {
        std::fprintf(stderr, "loom-run: error: %s\n", e.what());
        return 1;
    }
}
