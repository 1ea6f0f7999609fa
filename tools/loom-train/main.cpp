// loom-train: trains an MLP on generated spirals with ggml-opt and writes it
// as GGUF; --eval loads such a file and scores it on the same data. Results
// go to standard output, the progress bar and errors to standard error.
// Exit status: 0 on success, 1 when a model cannot be loaded or written or a
// device cannot start, 2 for a malformed command line.

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "data.h"
#include "devices.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"
#include "model.h"
#include "options.h"

namespace {

using loom_train::Mlp;
using loom_train::Options;
using loom_train::TrainInfo;

void log_warnings(ggml_log_level level, const char * text, void *) {
    static ggml_log_level last = GGML_LOG_LEVEL_NONE;
    if (level != GGML_LOG_LEVEL_CONT) {
        last = level;
    }
    if (last >= GGML_LOG_LEVEL_WARN) {
        std::fputs(text, stderr);
    }
}

struct LearningRate {
    float lr;
};

ggml_opt_optimizer_params optimizer_params(void * userdata) {
    const float               lr = static_cast<const LearningRate *>(userdata)->lr;
    ggml_opt_optimizer_params p  = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha                = lr;
    p.sgd.alpha                  = lr;
    return p;
}

struct Scores {
    double loss     = NAN;
    double accuracy = NAN;
};

Scores scores_of(ggml_opt_result_t r) {
    Scores s;
    double unc;
    ggml_opt_result_loss(r, &s.loss, &unc);
    ggml_opt_result_accuracy(r, &s.accuracy, &unc);
    return s;
}

// Forward passes over batches [first, end) of the dataset's current order.
Scores evaluate(ggml_opt_context_t opt, ggml_opt_dataset_t ds, int64_t first, int64_t end) {
    ggml_opt_result_t r = ggml_opt_result_init();
    for (int64_t ib = first; ib < end; ++ib) {
        ggml_opt_alloc(opt, false);
        ggml_opt_dataset_get_batch(ds, ggml_opt_inputs(opt), ggml_opt_labels(opt), ib);
        ggml_opt_eval(opt, r);
    }
    const Scores s = scores_of(r);
    ggml_opt_result_free(r);
    return s;
}

// The batches of n points held out by val_split.
int64_t validation_batches(int64_t n_batches, float val_split) {
    return int64_t(std::llround(double(val_split) * double(n_batches)));
}

void print_scores(const char * what, const Scores & train, const Scores & val, bool has_val) {
    std::printf("%s train loss %.9g acc %.6f", what, train.loss, train.accuracy);
    if (has_val) {
        std::printf("  val loss %.9g acc %.6f", val.loss, val.accuracy);
    }
    std::printf("\n");
    std::fflush(stdout);
}

// What a run sets up: devices, scheduler, a compute context with the graph.
struct Run {
    std::unique_ptr<loom_run::Backends> backends;
    std::unique_ptr<Mlp>                model; // freed after the optimizer context, before the backends
    ggml_backend_sched_t                sched = nullptr;
    ggml_context *                      ctx   = nullptr;
    ggml_context *                      ctx_inputs = nullptr; // static graphs need allocated inputs
    ggml_backend_buffer_t               buf_inputs = nullptr;
    ggml_opt_context_t                  opt   = nullptr;
    ggml_opt_dataset_t                  data  = nullptr;

    ~Run() {
        ggml_opt_free(opt);
        ggml_opt_dataset_free(data);
        ggml_free(ctx);
        ggml_backend_buffer_free(buf_inputs);
        ggml_free(ctx_inputs);
        if (sched != nullptr) {
            ggml_backend_sched_free(sched);
        }
    }

    // The scheduler over the backends and the compute context.
    void start() {
        sched = ggml_backend_sched_new(backends->data(), nullptr, int(backends->size()), GGML_DEFAULT_GRAPH_SIZE,
                                       false, true);
        ggml_init_params p = {GGML_DEFAULT_GRAPH_SIZE * ggml_tensor_overhead() +
                                  3 * ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, true),
                              nullptr, true};
        ctx                = ggml_init(p);
    }

    // The optimizer context for outputs of model on batches of `batch` points.
    // False with *error set when the inputs cannot be allocated.
    bool init_opt(const Mlp & model, int64_t batch, ggml_opt_build_type build, const Options & o, LearningRate * lr,
                  std::string * error) {
        ggml_init_params pi = {ggml_tensor_overhead(), nullptr, true};
        ctx_inputs          = ggml_init(pi);
        ggml_tensor * x     = ggml_new_tensor_2d(ctx_inputs, GGML_TYPE_F32, 2, batch);
        ggml_set_name(x, "points");
        buf_inputs = ggml_backend_alloc_ctx_tensors(ctx_inputs, backends->backend(0));
        if (buf_inputs == nullptr) {
            *error = std::string("cannot allocate the inputs on ") + backends->name(0);
            return false;
        }
        ggml_opt_params op = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
        op.ctx_compute     = ctx;
        op.inputs          = x;
        op.outputs         = model.forward(ctx, x);
        op.build_type      = build;
        op.optimizer       = o.sgd ? GGML_OPT_OPTIMIZER_TYPE_SGD : GGML_OPT_OPTIMIZER_TYPE_ADAMW;
        op.get_opt_pars    = optimizer_params;
        op.get_opt_pars_ud = lr;
        opt                = ggml_opt_init(op);
        return true;
    }
};

// Whether dev runs the optimizer step itself: the step updates the weights
// in place, so the device that holds them must run it.
bool runs_optimizer_step(ggml_backend_dev_t dev, bool sgd) {
    ggml_init_params p   = {8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_tensor *    w   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 4);
    ggml_set_param(w);
    ggml_tensor * g    = ggml_dup_tensor(ctx, w);
    ggml_tensor * step = sgd ? ggml_opt_step_sgd(ctx, w, g, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2))
                             : ggml_opt_step_adamw(ctx, w, g, ggml_dup_tensor(ctx, w), ggml_dup_tensor(ctx, w),
                                                   ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7));
    const bool ok = ggml_backend_dev_supports_op(dev, step);
    ggml_free(ctx);
    return ok;
}

int train(const Options & o, Run & run) {
    std::string          error;
    // The weights go to the first device's memory; some device that works
    // on that memory (the CPU on BLAS's host buffers, say) must step them.
    ggml_backend_buffer_type_t weights_buft = ggml_backend_get_default_buffer_type(run.backends->backend(0));
    bool                       stepped      = false;
    for (size_t i = 0; i < run.backends->size() && !stepped; ++i) {
        stepped = ggml_backend_dev_supports_buft(run.backends->device(i), weights_buft) &&
                  runs_optimizer_step(run.backends->device(i), o.sgd);
    }
    if (!stepped) {
        std::fprintf(stderr, "loom-train: no device runs the optimizer step (%s) on the memory of %s, which holds the "
                             "weights; list a device that does first in --device\n",
                     o.sgd ? "OPT_STEP_SGD" : "OPT_STEP_ADAMW", run.backends->name(0));
        return 1;
    }
    loom_train::ModelShape shape{o.hidden, o.layers, o.classes};
    run.model = Mlp::create(shape, run.backends->backend(0), &error);
    Mlp * model = run.model.get();
    if (model == nullptr) {
        std::fprintf(stderr, "loom-train: %s\n", error.c_str());
        return 1;
    }
    model->init_random(o.seed);
    model->set_params();

    const int64_t n_batches = o.points / o.batch;
    const int64_t n_val     = validation_batches(n_batches, o.val_split);
    const int64_t n_train   = n_batches - n_val;
    run.data                = loom_train::make_spirals(o.classes, n_batches * o.batch, o.seed);
    run.start();
    LearningRate lr{o.lr};
    if (!run.init_opt(*model, o.batch, GGML_OPT_BUILD_TYPE_OPT, o, &lr, &error)) {
        std::fprintf(stderr, "loom-train: %s\n", error.c_str());
        return 1;
    }
    std::fprintf(stderr, "loom-train: %lld parameters on %s, %lld training and %lld validation batches of %lld, %s\n",
                 (long long) model->n_params(), run.backends->name(0), (long long) n_train, (long long) n_val,
                 (long long) o.batch, o.sgd ? "SGD" : "AdamW");

    const int64_t         idata_split = n_train * o.batch;
    ggml_opt_epoch_callback bar       = o.progress ? ggml_opt_epoch_callback_progress_bar : nullptr;
    ggml_opt_result_t     rt          = ggml_opt_result_init();
    ggml_opt_result_t     rv          = ggml_opt_result_init();
    for (int e = 1; e <= o.epochs; ++e) {
        ggml_opt_result_reset(rt);
        ggml_opt_result_reset(rv);
        ggml_opt_dataset_shuffle(run.opt, run.data, idata_split);
        ggml_opt_epoch(run.opt, run.data, rt, rv, idata_split, bar, bar);
        char what[32];
        std::snprintf(what, sizeof what, "epoch %d:", e);
        print_scores(what, scores_of(rt), scores_of(rv), n_val > 0);
    }
    ggml_opt_result_free(rt);
    ggml_opt_result_free(rv);

    // The trained weights, scored as --eval scores them.
    TrainInfo info;
    info.seed      = o.seed;
    info.points    = n_batches * o.batch;
    info.batch     = o.batch;
    info.val_split = o.val_split;
    info.epochs    = o.epochs;
    info.lr        = o.lr;
    info.optimizer = o.sgd ? "sgd" : "adamw";
    const Scores t = evaluate(run.opt, run.data, 0, n_train);
    const Scores v = evaluate(run.opt, run.data, n_train, n_batches);
    info.train_loss     = t.loss;
    info.train_accuracy = t.accuracy;
    info.val_loss       = n_val > 0 ? v.loss : 0.0;
    info.val_accuracy   = n_val > 0 ? v.accuracy : 0.0;
    print_scores("final:", t, v, n_val > 0);

    if (!o.output.empty()) {
        if (!model->save(o.output, info, &error)) {
            std::fprintf(stderr, "loom-train: %s\n", error.c_str());
            return 1;
        }
        std::fprintf(stderr, "loom-train: wrote %s\n", o.output.c_str());
    }
    return 0;
}

int eval(const Options & o, Run & run) {
    std::string          error;
    TrainInfo            info;
    run.model = Mlp::load(o.eval, run.backends->backend(0), &info, &error);
    Mlp * model = run.model.get();
    if (model == nullptr) {
        std::fprintf(stderr, "loom-train: %s\n", error.c_str());
        return 1;
    }
    const int64_t n_batches = info.points / info.batch;
    const int64_t n_val     = validation_batches(n_batches, info.val_split);
    const int64_t n_train   = n_batches - n_val;
    if (n_train < 1 || n_batches * info.batch != info.points) {
        std::fprintf(stderr, "loom-train: %s: train.points %lld is not a whole number of batches of %lld\n",
                     o.eval.c_str(), (long long) info.points, (long long) info.batch);
        return 1;
    }
    run.data = loom_train::make_spirals(model->shape().classes, info.points, info.seed);
    run.start();
    LearningRate lr{info.lr};
    if (!run.init_opt(*model, info.batch, GGML_OPT_BUILD_TYPE_FORWARD, o, &lr, &error)) {
        std::fprintf(stderr, "loom-train: %s\n", error.c_str());
        return 1;
    }
    std::fprintf(stderr, "loom-train: %s: %lld parameters, trained %d epochs (%s, lr %g); recorded", o.eval.c_str(),
                 (long long) model->n_params(), int(info.epochs), info.optimizer.c_str(), double(info.lr));
    std::fprintf(stderr, " train loss %.9g acc %.6f", info.train_loss, info.train_accuracy);
    if (n_val > 0) {
        std::fprintf(stderr, " val loss %.9g acc %.6f", info.val_loss, info.val_accuracy);
    }
    std::fprintf(stderr, "\n");
    print_scores("eval:", evaluate(run.opt, run.data, 0, n_train), evaluate(run.opt, run.data, n_train, n_batches),
                 n_val > 0);
    return 0;
}

} // namespace

int main(int argc, char ** argv) {
    Options     o;
    std::string error;
    if (!loom_train::parse_args(argc, argv, &o, &error)) {
        std::fprintf(stderr, "loom-train: %s\n", error.c_str());
        return 2;
    }
    if (o.help) {
        std::fputs(loom_train::usage(argv[0]).c_str(), stdout);
        return 0;
    }
    ggml_log_set(log_warnings, nullptr);

    Run run;
    run.backends = loom_run::Backends::create(o.devices, {}, o.n_threads, &error);
    if (run.backends == nullptr) {
        std::fprintf(stderr, "loom-train: %s\n", error.c_str());
        return 1;
    }
    return o.eval.empty() ? train(o, run) : eval(o, run);
}
