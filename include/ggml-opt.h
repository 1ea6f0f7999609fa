#pragma once

// Training with ggml graphs: datasets of datapoints and labels, an optimizer
// context that builds the forward, gradient and optimizer-step graphs around a
// model's outputs and runs them on a backend scheduler, and results that
// collect loss and accuracy over many evaluations. The API of ggml 0.25.1.

#include <stdint.h>

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_opt_dataset;
struct ggml_opt_context;
struct ggml_opt_result;

typedef struct ggml_opt_dataset * ggml_opt_dataset_t;
typedef struct ggml_opt_context * ggml_opt_context_t;
typedef struct ggml_opt_result *  ggml_opt_result_t;

// The quantity minimized, built on the outputs (and labels).
enum ggml_opt_loss_type {
    GGML_OPT_LOSS_TYPE_MEAN,               // mean of the outputs
    GGML_OPT_LOSS_TYPE_SUM,                // sum of the outputs
    GGML_OPT_LOSS_TYPE_CROSS_ENTROPY,      // cross entropy of softmax(outputs) against the labels
    GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR, // mean of (outputs - labels)^2
};

//
// Datasets: data [ne_datapoint, ndata] and labels [ne_label, ndata] in host
// memory, cut into shards of ndata_shard datapoints, the unit of shuffling.
//

GGML_API ggml_opt_dataset_t ggml_opt_dataset_init(enum ggml_type type_data, enum ggml_type type_label,
                                                  int64_t ne_datapoint, int64_t ne_label, // ne_label 0: no labels
                                                  int64_t ndata, int64_t ndata_shard);
GGML_API void               ggml_opt_dataset_free(ggml_opt_dataset_t dataset);

GGML_API int64_t              ggml_opt_dataset_ndata(ggml_opt_dataset_t dataset);
GGML_API struct ggml_tensor * ggml_opt_dataset_data(ggml_opt_dataset_t dataset);   // [ne_datapoint, ndata]
GGML_API struct ggml_tensor * ggml_opt_dataset_labels(ggml_opt_dataset_t dataset); // [ne_label, ndata] or NULL

// Shuffles the shards of the first idata datapoints (all with idata < 0),
// with the context's random generator.
GGML_API void ggml_opt_dataset_shuffle(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, int64_t idata);

// Copies batch ibatch (in shuffled order) into data_batch [ne_datapoint,
// ndata_batch] and labels_batch [ne_label, ndata_batch] (NULL iff the dataset
// has no labels), or into host memory.
GGML_API void ggml_opt_dataset_get_batch(ggml_opt_dataset_t dataset, struct ggml_tensor * data_batch,
                                         struct ggml_tensor * labels_batch, int64_t ibatch);
GGML_API void ggml_opt_dataset_get_batch_host(ggml_opt_dataset_t dataset, void * data_batch, size_t nb_data_batch,
                                              void * labels_batch, int64_t ibatch);

//
// Optimizer context
//

// Which graphs are built: forward only, with gradients, with an optimizer step.
enum ggml_opt_build_type {
    GGML_OPT_BUILD_TYPE_FORWARD = 10,
    GGML_OPT_BUILD_TYPE_GRAD    = 20,
    GGML_OPT_BUILD_TYPE_OPT     = 30,
};

enum ggml_opt_optimizer_type {
    GGML_OPT_OPTIMIZER_TYPE_ADAMW,
    GGML_OPT_OPTIMIZER_TYPE_SGD,

    GGML_OPT_OPTIMIZER_TYPE_COUNT
};

// Parameters of one optimizer step.
struct ggml_opt_optimizer_params {
    struct {
        float alpha; // learning rate
        float beta1; // decay of the first moment
        float beta2; // decay of the second moment
        float eps;   // added to the second moment's root
        float wd;    // weight decay, 0 for none
    } adamw;
    struct {
        float alpha; // learning rate
        float wd;    // weight decay
    } sgd;
};

// Called before each optimizer step.
typedef struct ggml_opt_optimizer_params (*ggml_opt_get_optimizer_params)(void * userdata);

// AdamW alpha 1e-3, beta1 0.9, beta2 0.999, eps 1e-8, wd 0; SGD alpha 1e-3, wd 0.
GGML_API struct ggml_opt_optimizer_params ggml_opt_get_default_optimizer_params(void * userdata);
// *(struct ggml_opt_optimizer_params *) userdata.
GGML_API struct ggml_opt_optimizer_params ggml_opt_get_constant_optimizer_params(void * userdata);

struct ggml_opt_params {
    ggml_backend_sched_t backend_sched; // the backends the graphs run on

    // With ctx_compute, inputs and outputs set, the graphs are built once
    // (static graphs); otherwise per evaluation, from ggml_opt_prepare_alloc.
    struct ggml_context * ctx_compute;
    struct ggml_tensor *  inputs;
    struct ggml_tensor *  outputs;

    enum ggml_opt_loss_type  loss_type;
    enum ggml_opt_build_type build_type;

    int32_t opt_period; // gradient accumulation steps per optimizer step

    ggml_opt_get_optimizer_params get_opt_pars;
    void *                        get_opt_pars_ud;

    enum ggml_opt_optimizer_type optimizer;
};

// build_type OPT, opt_period 1, default optimizer parameters, AdamW.
GGML_API struct ggml_opt_params ggml_opt_default_params(ggml_backend_sched_t backend_sched,
                                                        enum ggml_opt_loss_type loss_type);

GGML_API ggml_opt_context_t ggml_opt_init(struct ggml_opt_params params);
GGML_API void               ggml_opt_free(ggml_opt_context_t opt_ctx);

// Zeroes the accumulated gradients; with optimizer, also the moments and the step count.
GGML_API void ggml_opt_reset(ggml_opt_context_t opt_ctx, bool optimizer);

GGML_API bool ggml_opt_static_graphs(ggml_opt_context_t opt_ctx);

GGML_API struct ggml_tensor * ggml_opt_inputs(ggml_opt_context_t opt_ctx);
GGML_API struct ggml_tensor * ggml_opt_outputs(ggml_opt_context_t opt_ctx);
GGML_API struct ggml_tensor * ggml_opt_labels(ggml_opt_context_t opt_ctx);   // NULL for MEAN and SUM
GGML_API struct ggml_tensor * ggml_opt_loss(ggml_opt_context_t opt_ctx);     // f32 scalar
GGML_API struct ggml_tensor * ggml_opt_pred(ggml_opt_context_t opt_ctx);     // argmax of outputs (cross entropy)
GGML_API struct ggml_tensor * ggml_opt_ncorrect(ggml_opt_context_t opt_ctx); // pred == argmax(labels) count
GGML_API struct ggml_tensor * ggml_opt_grad_acc(ggml_opt_context_t opt_ctx, struct ggml_tensor * node);

GGML_API enum ggml_opt_optimizer_type ggml_opt_context_optimizer_type(ggml_opt_context_t opt_ctx);
GGML_API const char *                 ggml_opt_optimizer_name(enum ggml_opt_optimizer_type type);

//
// Results: losses, predictions and correct counts of evaluations
//

GGML_API ggml_opt_result_t ggml_opt_result_init(void);
GGML_API void              ggml_opt_result_free(ggml_opt_result_t result);
GGML_API void              ggml_opt_result_reset(ggml_opt_result_t result);

GGML_API void ggml_opt_result_ndata(ggml_opt_result_t result, int64_t * ndata);
// The loss (mean per batch, or the sum for SUM) and its standard error (NaN below two batches).
GGML_API void ggml_opt_result_loss(ggml_opt_result_t result, double * loss, double * unc);
GGML_API void ggml_opt_result_pred(ggml_opt_result_t result, int32_t * pred); // ndata values
GGML_API void ggml_opt_result_accuracy(ggml_opt_result_t result, double * accuracy, double * unc);

//
// Evaluation
//

// Without static graphs: the forward graph gf of outputs from inputs, built in
// ctx_compute, for the next ggml_opt_alloc.
GGML_API void ggml_opt_prepare_alloc(ggml_opt_context_t opt_ctx, struct ggml_context * ctx_compute,
                                     struct ggml_cgraph * gf, struct ggml_tensor * inputs,
                                     struct ggml_tensor * outputs);

// Allocates the graph of the next evaluation: forward only, or with the
// backward pass (and an optimizer step every opt_period-th time).
GGML_API void ggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward);

// Runs the allocated graph and adds its loss, predictions and correct count to result (may be NULL).
GGML_API void ggml_opt_eval(ggml_opt_context_t opt_ctx, ggml_opt_result_t result);

// Called after each batch of ggml_opt_epoch.
typedef void (*ggml_opt_epoch_callback)(bool               train, // training batch, or evaluation
                                        ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset,
                                        ggml_opt_result_t result,
                                        int64_t           ibatch,     // batches done in this part
                                        int64_t           ibatch_max, // batches in this part
                                        int64_t           t_start_us);

// Trains on the datapoints before idata_split (all with idata_split < 0) and
// evaluates on the rest, batch by batch (static graphs only).
GGML_API void ggml_opt_epoch(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, ggml_opt_result_t result_train,
                             ggml_opt_result_t result_eval, int64_t idata_split,
                             ggml_opt_epoch_callback callback_train, ggml_opt_epoch_callback callback_eval);

// Prints a progress bar with loss, accuracy and times to stderr.
GGML_API void ggml_opt_epoch_callback_progress_bar(bool train, ggml_opt_context_t opt_ctx,
                                                   ggml_opt_dataset_t dataset, ggml_opt_result_t result,
                                                   int64_t ibatch, int64_t ibatch_max, int64_t t_start_us);

// Trains outputs (from inputs [ne_datapoint, ndata_batch]) on dataset for
// nepoch epochs with nbatch_logical datapoints per optimizer step, holding
// out the fraction val_split for validation. get_opt_pars receives a pointer
// to the epoch number (int64_t).
GGML_API void ggml_opt_fit(ggml_backend_sched_t backend_sched, struct ggml_context * ctx_compute,
                           struct ggml_tensor * inputs, struct ggml_tensor * outputs, ggml_opt_dataset_t dataset,
                           enum ggml_opt_loss_type loss_type, enum ggml_opt_optimizer_type optimizer,
                           ggml_opt_get_optimizer_params get_opt_pars, int64_t nepoch, int64_t nbatch_logical,
                           float val_split, bool silent);

#ifdef __cplusplus
}
#endif
