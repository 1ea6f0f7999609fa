// The optimizer context: the loss built on the outputs, the gradient and
// optimizer-step graphs, their allocation on the scheduler and evaluation.

#include <cmath>
#include <cstring>
#include <map>

#include "core/common.h"
#include "core/graph.h"
#include "ggml-alloc.h"
#include "ggml-backend-sched.h"
#include "opt_impl.h"

using namespace loom;

ggml_opt_context::~ggml_opt_context() {
    ggml_backend_buffer_free(buf_static);
    ggml_backend_buffer_free(buf_host);
    ggml_free(ctx_static);
    ggml_free(ctx_host);
    ggml_free(ctx_copy);
}

namespace {

// A copy of t (and of what it depends on) in ctx that shares t's memory.
ggml_tensor * copy_tensor(std::map<const ggml_tensor *, ggml_tensor *> & done, ggml_context * ctx, ggml_tensor * t) {
    if (t == nullptr) {
        return nullptr;
    }
    if (auto it = done.find(t); it != done.end()) {
        return it->second;
    }
    ggml_tensor * c = ggml_dup_tensor(ctx, t);
    done[t]         = c;
    c->op           = t->op;
    std::memcpy(c->nb, t->nb, sizeof(c->nb));
    c->flags = t->flags;
    std::memcpy(c->op_params, t->op_params, sizeof(c->op_params));
    std::memcpy(c->name, t->name, sizeof(c->name));
    c->data      = t->data;
    c->buffer    = t->buffer;
    c->extra     = t->extra;
    c->view_offs = t->view_offs;
    c->view_src  = copy_tensor(done, ctx, t->view_src);
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        c->src[i] = copy_tensor(done, ctx, t->src[i]);
    }
    return c;
}

// The graph src over copies of its tensors, with src's gradients.
ggml_cgraph * copy_graph(ggml_context * ctx, ggml_cgraph * src) {
    std::map<const ggml_tensor *, ggml_tensor *> done;
    ggml_cgraph * dst = ggml_new_graph_custom(ctx, size_t(src->size), true);
    for (int i = 0; i < src->n_leafs; ++i) ggml_build_forward_expand(dst, copy_tensor(done, ctx, src->leafs[i]));
    for (int i = 0; i < src->n_nodes; ++i) ggml_build_forward_expand(dst, copy_tensor(done, ctx, src->nodes[i]));
    LOOM_ASSERT(dst->n_leafs == src->n_leafs && dst->n_nodes == src->n_nodes);
    if (src->grads != nullptr) {
        for (int i = 0; i < src->n_nodes; ++i) {
            const size_t is = src->visited_hash_set.find(src->nodes[i]);
            const size_t id = dst->visited_hash_set.find(dst->nodes[i]);
            dst->grads[id]     = src->grads[is];
            dst->grad_accs[id] = src->grad_accs[is];
        }
    }
    return dst;
}

ggml_backend_buffer_t alloc_static(ggml_opt_context * o) {
    ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors(o->ctx_static, ggml_backend_sched_get_backend(o->sched, 0));
    LOOM_REQUIRE(b != nullptr || ggml_get_first_tensor(o->ctx_static) == nullptr,
                 "cannot allocate the optimizer's gradient accumulators and moments");
    return b;
}

void build_loss(ggml_opt_context * o, ggml_context * ctx) {
    ggml_tensor * out = o->outputs;
    switch (o->loss_type) {
        case GGML_OPT_LOSS_TYPE_MEAN:
            o->loss = ggml_set_name(ggml_sum(ctx, out), "loss_sum");
            o->loss = ggml_set_name(ggml_scale(ctx, o->loss, 1.0f / float(o->opt_period * ggml_nelements(out))),
                                    "loss_mean");
            o->loss_per_datapoint = true;
            break;
        case GGML_OPT_LOSS_TYPE_SUM:
            o->loss               = ggml_set_name(ggml_sum(ctx, out), "loss_sum");
            o->loss_per_datapoint = false;
            break;
        case GGML_OPT_LOSS_TYPE_CROSS_ENTROPY:
            o->labels = ggml_set_name(ggml_dup_tensor(ctx, out), "labels");
            ggml_set_input(o->labels);
            o->loss = ggml_set_name(ggml_cross_entropy_loss(ctx, out, o->labels), "loss_cross_entropy");
            if (o->opt_period > 1) {
                o->loss = ggml_set_name(ggml_scale(ctx, o->loss, 1.0f / float(o->opt_period)),
                                        "loss_cross_entropy_scaled");
            }
            o->loss_per_datapoint = true;
            break;
        case GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR:
            o->labels = ggml_set_name(ggml_dup_tensor(ctx, out), "labels");
            ggml_set_input(o->labels);
            o->loss = ggml_set_name(ggml_sub(ctx, out, o->labels), "loss_error");
            o->loss = ggml_set_name(ggml_sqr(ctx, o->loss), "loss_squared_error");
            o->loss = ggml_set_name(ggml_sum(ctx, o->loss), "loss_sum_squared_error");
            o->loss = ggml_set_name(ggml_scale(ctx, o->loss, 1.0f / float(o->opt_period * ggml_nelements(out))),
                                    "loss_mean_squared_error");
            o->loss_per_datapoint = true;
            break;
        default: fail("ggml_opt_init", "unknown loss type %d", int(o->loss_type));
    }
    ggml_set_output(o->loss);
    ggml_set_loss(o->loss);
    ggml_build_forward_expand(o->gf, o->loss);

    if (o->loss_type == GGML_OPT_LOSS_TYPE_CROSS_ENTROPY) {
        o->pred = ggml_set_name(ggml_argmax(ctx, out), "pred");
        ggml_set_output(o->pred);
        ggml_build_forward_expand(o->gf, o->pred);
        o->ncorrect = ggml_set_name(ggml_count_equal(ctx, o->pred, ggml_argmax(ctx, o->labels)), "ncorrect");
        ggml_set_output(o->ncorrect);
        ggml_build_forward_expand(o->gf, o->ncorrect);
    }
}

// Builds the graphs up to build_type_alloc around the forward graph gf.
void build(ggml_opt_context * o) {
    LOOM_REQUIRE(o->ctx_compute != nullptr,
                 "no compute context: use static graphs or call ggml_opt_prepare_alloc first");
    LOOM_REQUIRE(!o->static_graphs || o->inputs->data != nullptr,
                 "with static graphs the inputs must be allocated (%s has no memory)", describe(o->inputs).text);
    LOOM_REQUIRE(o->build_type <= o->build_type_alloc, "build type %d beyond the context's %d", int(o->build_type),
                 int(o->build_type_alloc));

    const bool accumulate = o->build_type_alloc >= GGML_OPT_BUILD_TYPE_GRAD &&
                            !(o->static_graphs && o->build_type_alloc == GGML_OPT_BUILD_TYPE_OPT && o->opt_period == 1);
    const bool momenta =
        o->build_type_alloc == GGML_OPT_BUILD_TYPE_OPT && o->optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW;

    ggml_set_input(o->inputs);
    ggml_set_output(o->outputs);

    int n_param = 0;
    for (int i = 0; i < o->gf->n_nodes; ++i) {
        const ggml_tensor * node = o->gf->nodes[i];
        n_param += (node->flags & GGML_TENSOR_FLAG_PARAM) != 0;
        LOOM_REQUIRE(!(node->flags & GGML_TENSOR_FLAG_LOSS),
                     "the model graph already has a loss (%s); the context builds its own", describe(node).text);
    }
    LOOM_REQUIRE(o->build_type_alloc == GGML_OPT_BUILD_TYPE_FORWARD || n_param > 0,
                 "the graph of %s has no parameters (ggml_set_param) to train", describe(o->outputs).text);

    if (o->ctx_static == nullptr) {
        const size_t per_param = (accumulate ? 1 : 0) + (momenta ? 2 : 0);
        const size_t fixed     = o->static_graphs ? 9 : 0; // labels, loss chain, pred, ncorrect
        ggml_init_params p     = {(1 + per_param * size_t(n_param) + fixed) * ggml_tensor_overhead(), nullptr, true};
        o->ctx_static          = ggml_init(p);
    }
    {
        ggml_free(o->ctx_host);
        ggml_init_params p = {ggml_tensor_overhead(), nullptr, true};
        o->ctx_host        = ggml_init(p);
        ggml_backend_buffer_free(o->buf_host);
        o->buf_host = nullptr;
    }

    build_loss(o, o->static_graphs ? o->ctx_static : o->ctx_compute);

    if (o->buf_static != nullptr) {
        if (o->build_type == GGML_OPT_BUILD_TYPE_FORWARD) return;
    } else if (o->build_type_alloc == GGML_OPT_BUILD_TYPE_FORWARD) {
        o->buf_static = alloc_static(o);
        return;
    }

    const int n_nodes = o->gf->n_nodes;
    if (o->grad_accs.empty()) {
        o->grad_accs.assign(size_t(n_nodes), nullptr);
        for (int i = 0; i < n_nodes; ++i) {
            ggml_tensor * node = o->gf->nodes[i];
            if ((accumulate && (node->flags & GGML_TENSOR_FLAG_PARAM)) || (node->flags & GGML_TENSOR_FLAG_LOSS)) {
                o->grad_accs[size_t(i)] = ggml_new_tensor(o->ctx_static, GGML_TYPE_F32, GGML_MAX_DIMS, node->ne);
            }
        }
        if (momenta) {
            o->grad_m.assign(size_t(n_nodes), nullptr);
            o->grad_v.assign(size_t(n_nodes), nullptr);
            for (int i = 0; i < n_nodes; ++i) {
                ggml_tensor * node = o->gf->nodes[i];
                if (node->flags & GGML_TENSOR_FLAG_PARAM) {
                    o->grad_m[size_t(i)] = ggml_new_tensor(o->ctx_static, GGML_TYPE_F32, GGML_MAX_DIMS, node->ne);
                    o->grad_v[size_t(i)] = ggml_new_tensor(o->ctx_static, GGML_TYPE_F32, GGML_MAX_DIMS, node->ne);
                }
            }
        }
    }

    o->gb_grad = ggml_graph_dup(o->ctx_compute, o->gf, true);
    ggml_build_backward_expand(o->ctx_compute, o->gb_grad, o->grad_accs.data());

    if (o->buf_static != nullptr) {
        if (o->build_type == GGML_OPT_BUILD_TYPE_GRAD) return;
    } else if (o->build_type_alloc == GGML_OPT_BUILD_TYPE_GRAD) {
        o->buf_static = alloc_static(o);
        ggml_graph_reset(o->gb_grad);
    }
    LOOM_ASSERT(o->build_type_alloc == GGML_OPT_BUILD_TYPE_OPT);

    o->gb_opt      = ggml_graph_dup(o->ctx_compute, o->gb_grad, true);
    o->step_params = ggml_new_tensor_1d(o->ctx_host, GGML_TYPE_F32, momenta ? 7 : 2);
    ggml_set_input(o->step_params);
    const char * name = ggml_opt_optimizer_name(o->optimizer);
    ggml_format_name(o->step_params, "%s_params", name);
    for (int i = n_nodes - 1; i >= 0; --i) {
        ggml_tensor * node = o->gb_opt->nodes[i];
        ggml_tensor * grad = ggml_graph_get_grad(o->gb_opt, node);
        if (grad == nullptr || !(node->flags & GGML_TENSOR_FLAG_PARAM)) {
            continue;
        }
        ggml_tensor * step = nullptr;
        if (o->optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW) {
            ggml_tensor * m = o->grad_m[size_t(i)];
            ggml_tensor * v = o->grad_v[size_t(i)];
            ggml_format_name(m, "AdamW m for %s", node->name);
            ggml_format_name(v, "AdamW v for %s", node->name);
            step = ggml_opt_step_adamw(o->ctx_compute, node, grad, m, v, o->step_params);
        } else {
            step = ggml_opt_step_sgd(o->ctx_compute, node, grad, o->step_params);
        }
        ggml_format_name(step, "%s step for %s", name, node->name);
        ggml_build_forward_expand(o->gb_opt, step);
    }

    if (o->buf_static == nullptr) {
        o->buf_static = alloc_static(o);
        ggml_graph_reset(o->gb_opt);
    }
    o->buf_host = ggml_backend_alloc_ctx_tensors_from_buft(o->ctx_host, opt::host_buffer_type());
    LOOM_REQUIRE(o->buf_host != nullptr, "cannot allocate the optimizer's parameters");
}

void write_step_params(ggml_opt_context * o) {
    const ggml_opt_optimizer_params p = o->get_opt_pars(o->get_opt_pars_ud);
    float *                         d = static_cast<float *>(o->step_params->data);
    if (o->optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW) {
        const auto & a = p.adamw;
        LOOM_REQUIRE(a.alpha > 0.0f && a.beta1 >= 0.0f && a.beta1 <= 1.0f && a.beta2 >= 0.0f && a.beta2 <= 1.0f &&
                         a.eps >= 0.0f && a.wd >= 0.0f && a.wd <= 1.0f,
                     "bad AdamW parameters: alpha %g, beta1 %g, beta2 %g, eps %g, wd %g", double(a.alpha),
                     double(a.beta1), double(a.beta2), double(a.eps), double(a.wd));
        d[0] = a.alpha;
        d[1] = a.beta1;
        d[2] = a.beta2;
        d[3] = a.eps;
        d[4] = a.wd;
        // Bias corrections of the moments after iter steps.
        d[5] = 1.0f / (1.0f - std::pow(a.beta1, float(o->iter)));
        d[6] = 1.0f / (1.0f - std::pow(a.beta2, float(o->iter)));
    } else {
        LOOM_REQUIRE(p.sgd.alpha > 0.0f && p.sgd.wd >= 0.0f && p.sgd.wd <= 1.0f,
                     "bad SGD parameters: alpha %g, wd %g", double(p.sgd.alpha), double(p.sgd.wd));
        d[0] = p.sgd.alpha;
        d[1] = p.sgd.wd;
    }
}

} // namespace

extern "C" {

ggml_opt_optimizer_params ggml_opt_get_default_optimizer_params(void * userdata) {
    (void) userdata;
    ggml_opt_optimizer_params p;
    p.adamw = {0.001f, 0.9f, 0.999f, 1e-8f, 0.0f};
    p.sgd   = {1e-3f, 0.0f};
    return p;
}

ggml_opt_optimizer_params ggml_opt_get_constant_optimizer_params(void * userdata) {
    return *static_cast<const ggml_opt_optimizer_params *>(userdata);
}

ggml_opt_params ggml_opt_default_params(ggml_backend_sched_t backend_sched, ggml_opt_loss_type loss_type) {
    ggml_opt_params p;
    p.backend_sched   = backend_sched;
    p.ctx_compute     = nullptr;
    p.inputs          = nullptr;
    p.outputs         = nullptr;
    p.loss_type       = loss_type;
    p.build_type      = GGML_OPT_BUILD_TYPE_OPT;
    p.opt_period      = 1;
    p.get_opt_pars    = ggml_opt_get_default_optimizer_params;
    p.get_opt_pars_ud = nullptr;
    p.optimizer       = GGML_OPT_OPTIMIZER_TYPE_ADAMW;
    return p;
}

ggml_opt_context_t ggml_opt_init(ggml_opt_params params) {
    LOOM_REQUIRE(params.backend_sched != nullptr, "no backend scheduler");
    LOOM_REQUIRE(params.opt_period >= 1, "opt_period %d must be at least 1", int(params.opt_period));
    LOOM_REQUIRE(params.optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW || params.optimizer == GGML_OPT_OPTIMIZER_TYPE_SGD,
                 "unknown optimizer %d", int(params.optimizer));
    LOOM_REQUIRE(params.build_type == GGML_OPT_BUILD_TYPE_FORWARD || params.build_type == GGML_OPT_BUILD_TYPE_GRAD ||
                     params.build_type == GGML_OPT_BUILD_TYPE_OPT,
                 "unknown build type %d", int(params.build_type));
    LOOM_REQUIRE(params.get_opt_pars != nullptr, "no optimizer parameter callback");
    auto * o             = new ggml_opt_context;
    o->sched             = params.backend_sched;
    o->ctx_compute       = params.ctx_compute;
    o->loss_type         = params.loss_type;
    o->build_type        = params.build_type;
    o->build_type_alloc  = params.build_type;
    o->inputs            = params.inputs;
    o->outputs           = params.outputs;
    o->opt_period        = params.opt_period;
    o->get_opt_pars      = params.get_opt_pars;
    o->get_opt_pars_ud   = params.get_opt_pars_ud;
    o->optimizer         = params.optimizer;
    o->static_graphs     = params.ctx_compute != nullptr;
    if (!o->static_graphs) {
        LOOM_REQUIRE(params.inputs == nullptr && params.outputs == nullptr,
                     "inputs and outputs without ctx_compute: set all three for static graphs, or none");
        return o;
    }
    LOOM_REQUIRE(params.inputs != nullptr && params.outputs != nullptr,
                 "static graphs (ctx_compute set) need inputs and outputs");
    o->gf = ggml_new_graph_custom(o->ctx_compute, GGML_DEFAULT_GRAPH_SIZE, true);
    ggml_build_forward_expand(o->gf, o->outputs);
    build(o);
    return o;
}

void ggml_opt_free(ggml_opt_context_t opt_ctx) {
    delete opt_ctx;
}

void ggml_opt_reset(ggml_opt_context_t opt_ctx, bool optimizer) {
    if (optimizer) {
        ggml_graph_reset(opt_ctx->gb_opt);
        opt_ctx->iter = 1;
    } else {
        ggml_graph_reset(opt_ctx->gb_grad);
    }
}

bool ggml_opt_static_graphs(ggml_opt_context_t opt_ctx) {
    return opt_ctx->static_graphs;
}
ggml_tensor * ggml_opt_inputs(ggml_opt_context_t opt_ctx) {
    return opt_ctx->inputs;
}
ggml_tensor * ggml_opt_outputs(ggml_opt_context_t opt_ctx) {
    return opt_ctx->outputs;
}
ggml_tensor * ggml_opt_labels(ggml_opt_context_t opt_ctx) {
    return opt_ctx->labels;
}
ggml_tensor * ggml_opt_loss(ggml_opt_context_t opt_ctx) {
    return opt_ctx->loss;
}
ggml_tensor * ggml_opt_pred(ggml_opt_context_t opt_ctx) {
    return opt_ctx->pred;
}
ggml_tensor * ggml_opt_ncorrect(ggml_opt_context_t opt_ctx) {
    return opt_ctx->ncorrect;
}
ggml_tensor * ggml_opt_grad_acc(ggml_opt_context_t opt_ctx, ggml_tensor * node) {
    return opt_ctx->gb_opt != nullptr ? ggml_graph_get_grad_acc(opt_ctx->gb_opt, node) : nullptr;
}

ggml_opt_optimizer_type ggml_opt_context_optimizer_type(ggml_opt_context_t opt_ctx) {
    return opt_ctx->optimizer;
}

const char * ggml_opt_optimizer_name(ggml_opt_optimizer_type type) {
    switch (type) {
        case GGML_OPT_OPTIMIZER_TYPE_ADAMW: return "adamw";
        case GGML_OPT_OPTIMIZER_TYPE_SGD: return "sgd";
        default: return "undefined";
    }
}

void ggml_opt_prepare_alloc(ggml_opt_context_t opt_ctx, ggml_context * ctx_compute, ggml_cgraph * gf,
                            ggml_tensor * inputs, ggml_tensor * outputs) {
    LOOM_REQUIRE(!opt_ctx->static_graphs, "the context has static graphs");
    opt_ctx->ctx_compute = ctx_compute;
    opt_ctx->gf          = gf;
    opt_ctx->inputs      = inputs;
    opt_ctx->outputs     = outputs;
}

void ggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward) {
    ggml_opt_context * o = opt_ctx;
    LOOM_REQUIRE(!o->eval_ready, "the graph allocated before has not been evaluated (ggml_opt_eval)");
    if (o->build_type == GGML_OPT_BUILD_TYPE_OPT && o->opt_period > 1 && o->opt_i == 0) {
        ggml_graph_reset(o->gb_grad); // a new round of accumulation
    }
    if (backward) {
        const int32_t next = (o->opt_i + 1) % o->opt_period;
        o->build_type      = next == 0 ? GGML_OPT_BUILD_TYPE_OPT : GGML_OPT_BUILD_TYPE_GRAD;
    } else {
        o->build_type = GGML_OPT_BUILD_TYPE_FORWARD;
    }
    LOOM_REQUIRE(o->build_type <= o->build_type_alloc, "the context was made for build type %d, not %d",
                 int(o->build_type_alloc), int(o->build_type));
    if (!o->static_graphs) {
        LOOM_REQUIRE(o->gf != nullptr, "no forward graph: call ggml_opt_prepare_alloc first");
        build(o);
    }
    ggml_cgraph * g = o->build_type == GGML_OPT_BUILD_TYPE_FORWARD ? o->gf
                      : o->build_type == GGML_OPT_BUILD_TYPE_GRAD  ? o->gb_grad
                                                                   : o->gb_opt;
    LOOM_ASSERT(g != nullptr);
    if (o->allocated == g) {
        o->eval_ready = true;
        return;
    }
    ggml_backend_sched_reset(o->sched);
    if (o->static_graphs) {
        ggml_free(o->ctx_copy);
        ggml_init_params p = {size_t(g->size) * ggml_tensor_overhead() + ggml_graph_overhead_custom(size_t(g->size), true),
                              nullptr, true};
        o->ctx_copy       = ggml_init(p);
        o->allocated_copy = copy_graph(o->ctx_copy, g);
    } else {
        o->allocated_copy = g;
    }
    LOOM_REQUIRE(ggml_backend_sched_alloc_graph(o->sched, o->allocated_copy), "cannot allocate the graph");
    o->allocated  = g;
    o->eval_ready = true;
}

void ggml_opt_eval(ggml_opt_context_t opt_ctx, ggml_opt_result_t result) {
    ggml_opt_context * o = opt_ctx;
    LOOM_REQUIRE(o->eval_ready, "no graph allocated: call ggml_opt_alloc first");
    const bool step = o->allocated == o->gb_opt;
    if (step) {
        write_step_params(o);
    }
    const ggml_status st = ggml_backend_sched_graph_compute(o->sched, o->allocated_copy);
    LOOM_REQUIRE(st == GGML_STATUS_SUCCESS, "computing the graph failed (%s)", ggml_status_to_string(st));
    o->iter += step ? 1 : 0;
    o->opt_i = (o->opt_i + 1) % o->opt_period;
    if (!o->static_graphs) {
        o->gf             = nullptr;
        o->gb_grad        = nullptr;
        o->gb_opt         = nullptr;
        o->allocated      = nullptr;
        o->allocated_copy = nullptr;
    }
    o->eval_ready = false;
    if (result == nullptr) {
        return;
    }

    if (result->ndata == 0) {
        result->loss_per_datapoint = o->loss_per_datapoint;
        result->opt_period         = o->opt_period;
    } else {
        LOOM_REQUIRE(result->loss_per_datapoint == o->loss_per_datapoint && result->opt_period == o->opt_period,
                     "the result collects evaluations of a context with another loss or opt_period");
    }
    const int64_t ndata = o->outputs->ne[1];
    LOOM_REQUIRE(result->ndata == ndata * int64_t(result->loss.size()),
                 "batches of different sizes in one result (%lld datapoints after %zu batches, now %lld)",
                 (long long) result->ndata, result->loss.size(), (long long) ndata);
    result->ndata += ndata;

    float loss = 0.0f;
    ggml_backend_tensor_get(o->loss, &loss, 0, sizeof(loss));
    result->loss.push_back(loss);
    if (o->pred != nullptr) {
        const size_t n0 = result->pred.size();
        result->pred.resize(n0 + size_t(ndata));
        ggml_backend_tensor_get(o->pred, result->pred.data() + n0, 0, ggml_nbytes(o->pred));
    }
    if (o->ncorrect == nullptr || result->ncorrect < 0) {
        result->ncorrect = -1;
        return;
    }
    int64_t ncorrect = 0;
    ggml_backend_tensor_get(o->ncorrect, &ncorrect, 0, sizeof(ncorrect));
    result->ncorrect += ncorrect;
}

} // extern "C"
