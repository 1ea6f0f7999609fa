#pragma once

// The objects behind ggml-opt.h's handles.

#include <cstdint>
#include <random>
#include <vector>

#include "ggml-opt.h"

struct ggml_opt_dataset {
    ggml_context *        ctx    = nullptr;
    ggml_backend_buffer_t buf    = nullptr;
    ggml_tensor *         data   = nullptr;
    ggml_tensor *         labels = nullptr;

    int64_t ndata        = 0;
    int64_t ndata_shard  = 0;
    size_t  shard_data   = 0; // bytes of data per shard
    size_t  shard_labels = 0; // bytes of labels per shard

    std::vector<int64_t> order; // shard order of the batches

    ~ggml_opt_dataset();
};

struct ggml_opt_context {
    ggml_backend_sched_t sched = nullptr;

    // The graph the scheduler has allocated, and the copy it runs (static
    // graphs run a copy so that the scheduler's allocation leaves the
    // user's tensors as they are).
    ggml_cgraph * allocated      = nullptr;
    ggml_cgraph * allocated_copy = nullptr;

    ggml_context *        ctx_static  = nullptr; // accumulators, moments, static results
    ggml_context *        ctx_host    = nullptr; // the optimizer's parameters
    ggml_context *        ctx_compute = nullptr;
    ggml_context *        ctx_copy    = nullptr;
    ggml_backend_buffer_t buf_static  = nullptr;
    ggml_backend_buffer_t buf_host    = nullptr;

    std::mt19937 rng;

    ggml_opt_loss_type  loss_type;
    ggml_opt_build_type build_type;       // of the next evaluation
    ggml_opt_build_type build_type_alloc; // the most the context was made for

    ggml_tensor * inputs   = nullptr;
    ggml_tensor * outputs  = nullptr;
    ggml_tensor * labels   = nullptr;
    ggml_tensor * loss     = nullptr;
    ggml_tensor * pred     = nullptr;
    ggml_tensor * ncorrect = nullptr;

    ggml_cgraph * gf      = nullptr; // forward
    ggml_cgraph * gb_grad = nullptr; // forward + gradients
    ggml_cgraph * gb_opt  = nullptr; // forward + gradients + optimizer step
    bool          static_graphs = false;
    bool          eval_ready    = false;

    std::vector<ggml_tensor *> grad_accs; // by forward node
    std::vector<ggml_tensor *> grad_m;
    std::vector<ggml_tensor *> grad_v;

    int64_t iter               = 1; // optimizer steps + 1
    int32_t opt_period         = 1;
    int32_t opt_i              = 0; // evaluations since the last optimizer step
    bool    loss_per_datapoint = false;

    ggml_opt_get_optimizer_params get_opt_pars    = nullptr;
    void *                        get_opt_pars_ud = nullptr;
    ggml_tensor *                 step_params     = nullptr;

    ggml_opt_optimizer_type optimizer = GGML_OPT_OPTIMIZER_TYPE_ADAMW;

    ~ggml_opt_context();
};

struct ggml_opt_result {
    int64_t              ndata = 0;
    std::vector<float>   loss; // one per evaluation
    std::vector<int32_t> pred;
    int64_t              ncorrect = 0; // -1: not known

    int64_t opt_period         = -1;
    bool    loss_per_datapoint = false;
};

namespace loom::opt {

// The backend buffer type of host memory (the CPU device's).
ggml_backend_buffer_type_t host_buffer_type();

} // namespace loom::opt
