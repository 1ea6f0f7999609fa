// Epochs over a dataset, the progress bar, and ggml_opt_fit.

#include <cinttypes>
#include <cstdio>

#include "core/common.h"
#include "opt_impl.h"

using namespace loom;

namespace {

struct Hms {
    int64_t h, m, s;
};

Hms hms(int64_t us) {
    int64_t s = us / 1000000;
    const int64_t h = s / 3600;
    s -= h * 3600;
    const int64_t m = s / 60;
    return {h, m, s - m * 60};
}

} // namespace

extern "C" {

void ggml_opt_epoch(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, ggml_opt_result_t result_train,
                    ggml_opt_result_t result_eval, int64_t idata_split, ggml_opt_epoch_callback callback_train,
                    ggml_opt_epoch_callback callback_eval) {
    LOOM_REQUIRE(ggml_opt_static_graphs(opt_ctx), "needs a context with static graphs");
    ggml_tensor * inputs = ggml_opt_inputs(opt_ctx);
    ggml_tensor * labels = ggml_opt_labels(opt_ctx);
    ggml_tensor * data   = ggml_opt_dataset_data(dataset);
    LOOM_REQUIRE(data->ne[0] == inputs->ne[0], "the dataset has %lld values per datapoint, the inputs %lld",
                 (long long) data->ne[0], (long long) inputs->ne[0]);
    LOOM_REQUIRE((labels == nullptr) == (ggml_opt_dataset_labels(dataset) == nullptr),
                 "the loss %s labels but the dataset %s them", labels ? "needs" : "takes no",
                 ggml_opt_dataset_labels(dataset) ? "has" : "lacks");
    LOOM_REQUIRE(labels == nullptr || ggml_opt_dataset_labels(dataset)->ne[0] == labels->ne[0],
                 "the dataset has %lld values per label, the outputs %lld",
                 (long long) ggml_opt_dataset_labels(dataset)->ne[0], (long long) labels->ne[0]);
    const int64_t ndata = data->ne[1];
    const int64_t batch = inputs->ne[1];
    LOOM_REQUIRE(ndata % batch == 0, "the dataset's %lld datapoints are not a multiple of the batch size %lld",
                 (long long) ndata, (long long) batch);
    const int64_t nbatches = ndata / batch;
    idata_split            = idata_split < 0 ? ndata : idata_split;
    LOOM_REQUIRE(idata_split % batch == 0 && idata_split <= ndata,
                 "idata_split %lld is not a multiple of the batch size %lld within %lld datapoints",
                 (long long) idata_split, (long long) batch, (long long) ndata);
    const int64_t ibatch_split = idata_split / batch;

    int64_t ibatch = 0;
    int64_t t0     = ggml_time_us();
    for (; ibatch < ibatch_split; ++ibatch) {
        ggml_opt_alloc(opt_ctx, true);
        ggml_opt_dataset_get_batch(dataset, inputs, labels, ibatch);
        ggml_opt_eval(opt_ctx, result_train);
        if (callback_train != nullptr) {
            callback_train(true, opt_ctx, dataset, result_train, ibatch + 1, ibatch_split, t0);
        }
    }
    t0 = ggml_time_us();
    for (; ibatch < nbatches; ++ibatch) {
        ggml_opt_alloc(opt_ctx, false);
        ggml_opt_dataset_get_batch(dataset, inputs, labels, ibatch);
        ggml_opt_eval(opt_ctx, result_eval);
        if (callback_eval != nullptr) {
            callback_eval(false, opt_ctx, dataset, result_eval, ibatch + 1 - ibatch_split, nbatches - ibatch_split, t0);
        }
    }
}

void ggml_opt_epoch_callback_progress_bar(bool train, ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset,
                                          ggml_opt_result_t result, int64_t ibatch, int64_t ibatch_max,
                                          int64_t t_start_us) {
    (void) dataset;
    // Eight cells, each filled in eighths (U+2588 full ... U+258F one eighth).
    static const char * const kCells[] = {" ", "\u258F", "\u258E", "\u258D", "\u258C",
                                          "\u258B", "\u258A", "\u2589", "\u2588"};
    std::fprintf(stderr, "%s[", train ? "train: " : "val:   ");
    for (int64_t j = 0; j < 8; ++j) {
        int eighths = 0;
        for (int k = 8; k >= 1; --k) {
            if (ibatch_max * (8 * j + k) / 8 < 8 * ibatch) {
                eighths = k;
                break;
            }
        }
        std::fputs(kCells[eighths], stderr);
    }
    const int64_t batch = ggml_opt_inputs(opt_ctx)->ne[1];
    double        loss, loss_unc, acc, acc_unc;
    ggml_opt_result_loss(result, &loss, &loss_unc);
    ggml_opt_result_accuracy(result, &acc, &acc_unc);
    const int64_t t_us  = ggml_time_us() - t_start_us;
    const Hms     t     = hms(t_us);
    const Hms     eta   = hms(ibatch > 0 ? t_us * (ibatch_max - ibatch) / ibatch : 0);
    std::fprintf(stderr,
                 "] data=%07" PRId64 "/%07" PRId64 " loss=%.5lf\u00b1%.5lf acc=%.2lf\u00b1%.2lf%% t=%02" PRId64
                 ":%02" PRId64 ":%02" PRId64 " ETA=%02" PRId64 ":%02" PRId64 ":%02" PRId64 " \r",
                 ibatch * batch, ibatch_max * batch, loss, loss_unc, 100.0 * acc, 100.0 * acc_unc, t.h, t.m, t.s,
                 eta.h, eta.m, eta.s);
    if (ibatch == ibatch_max) {
        std::fputc('\n', stderr);
    }
    std::fflush(stderr);
}

void ggml_opt_fit(ggml_backend_sched_t backend_sched, ggml_context * ctx_compute, ggml_tensor * inputs,
                  ggml_tensor * outputs, ggml_opt_dataset_t dataset, ggml_opt_loss_type loss_type,
                  ggml_opt_optimizer_type optimizer, ggml_opt_get_optimizer_params get_opt_pars, int64_t nepoch,
                  int64_t nbatch_logical, float val_split, bool silent) {
    ggml_time_init();
    const int64_t t_start = ggml_time_us();
    const int64_t ndata   = ggml_opt_dataset_data(dataset)->ne[1];
    const int64_t nbatch  = inputs->ne[1];
    LOOM_REQUIRE(nbatch_logical > 0 && ndata % nbatch_logical == 0,
                 "the dataset's %lld datapoints are not a multiple of nbatch_logical %lld", (long long) ndata,
                 (long long) nbatch_logical);
    LOOM_REQUIRE(nbatch_logical % nbatch == 0, "nbatch_logical %lld is not a multiple of the inputs' batch %lld",
                 (long long) nbatch_logical, (long long) nbatch);
    LOOM_REQUIRE(val_split >= 0.0f && val_split < 1.0f, "val_split %g outside [0, 1)", double(val_split));
    const int64_t opt_period   = nbatch_logical / nbatch;
    const int64_t nlogical     = ndata / nbatch_logical;
    const int64_t ibatch_split = int64_t((1.0f - val_split) * float(nlogical)) * opt_period;
    const int64_t idata_split  = ibatch_split * nbatch;

    int64_t         epoch  = 1;
    ggml_opt_params params = ggml_opt_default_params(backend_sched, loss_type);
    params.ctx_compute     = ctx_compute;
    params.inputs          = inputs;
    params.outputs         = outputs;
    params.opt_period      = int32_t(opt_period);
    params.get_opt_pars    = get_opt_pars;
    params.get_opt_pars_ud = &epoch;
    params.optimizer       = optimizer;
    ggml_opt_context_t opt_ctx = ggml_opt_init(params);

    if (nbatch_logical < ndata) {
        ggml_opt_dataset_shuffle(opt_ctx, dataset, -1); // once over training and validation data
    }
    ggml_opt_result_t       train = ggml_opt_result_init();
    ggml_opt_result_t       val   = ggml_opt_result_init();
    ggml_opt_epoch_callback cb    = silent ? nullptr : ggml_opt_epoch_callback_progress_bar;
    for (; epoch <= nepoch; ++epoch) {
        if (nbatch_logical < idata_split) {
            ggml_opt_dataset_shuffle(opt_ctx, dataset, idata_split);
        }
        ggml_opt_result_reset(train);
        ggml_opt_result_reset(val);
        if (!silent) {
            std::fprintf(stderr, "%s: epoch %04" PRId64 "/%04" PRId64 ":\n", __func__, epoch, nepoch);
        }
        ggml_opt_epoch(opt_ctx, dataset, train, val, idata_split, cb, cb);
        if (!silent) {
            std::fputc('\n', stderr);
        }
    }
    if (!silent) {
        const Hms t = hms(ggml_time_us() - t_start);
        std::fprintf(stderr, "%s: training took %02" PRId64 ":%02" PRId64 ":%02" PRId64 "\n", __func__, t.h, t.m,
                     t.s);
    }
    ggml_opt_free(opt_ctx);
    ggml_opt_result_free(train);
    ggml_opt_result_free(val);
}

} // extern "C"
