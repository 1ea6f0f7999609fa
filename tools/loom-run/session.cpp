#include "session.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "devices.h"
#include "model.h"

namespace loom_run {

namespace {

// n_kv is rounded up to this (see session.h).
constexpr uint32_t KV_PAD = 256;

const char * status_text(ggml_status s) {
    switch (s) {
        case GGML_STATUS_ALLOC_FAILED: return "memory allocation failed";
        case GGML_STATUS_FAILED: return "failed";
        case GGML_STATUS_ABORTED: return "aborted";
        case GGML_STATUS_SUCCESS: return "succeeded";
    }
    return "unknown status";
}

// Whether dev can write one token into K and V caches of these types and
// shapes (the SET_ROWS nodes that build() makes); empty when it can, else
// the cache that it cannot write. (Without memory for the probe's
// metadata it answers empty: the cache's own allocation then fails with its
// own message.)
std::string cache_writes_unsupported(ggml_backend_dev_t dev, const SessionOptions & o, int64_t n_embd_kv) {
    ggml_init_params ip{};
    ip.mem_size        = 8 * ggml_tensor_overhead();
    ip.no_alloc        = true;
    ggml_context * ctx = ggml_init(ip);
    if (ctx == nullptr) {
        return "";
    }
    const int64_t n_ctx = o.n_ctx;
    ggml_tensor * k     = ggml_new_tensor_2d(ctx, o.type_k, n_embd_kv, n_ctx);
    ggml_tensor * k_set = ggml_set_rows(ctx, k, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_embd_kv, 1),
                                        ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1));
    ggml_tensor * v_set = nullptr;
    if (o.flash_attn) {
        v_set = ggml_set_rows(ctx, ggml_new_tensor_2d(ctx, o.type_v, n_embd_kv, n_ctx),
                              ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_embd_kv, 1),
                              ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1));
    } else {
        v_set = ggml_set_rows(ctx, ggml_new_tensor_2d(ctx, o.type_v, 1, n_ctx * n_embd_kv),
                              ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, n_embd_kv),
                              ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_embd_kv));
    }
    std::string which;
    if (!ggml_backend_dev_supports_op(dev, k_set)) {
        which = "K";
    } else if (!ggml_backend_dev_supports_op(dev, v_set)) {
        which = "V";
    }
    ggml_free(ctx);
    return which;
}

} // namespace

Session::Session(const Model & model, Backends & backends, const SessionOptions & options)
    : model_(model), backends_(backends), options_(options) {}

Session::~Session() {
    ggml_backend_sched_free(sched_); // writes the trace, if any
    ggml_free(graph_ctx_);
    for (ggml_backend_buffer_t b : kv_buffers_) {
        ggml_backend_buffer_free(b);
    }
    for (ggml_context * c : kv_contexts_) {
        ggml_free(c);
    }
}

std::unique_ptr<Session> Session::create(const Model & model, Backends & backends, const SessionOptions & options,
                                         std::string * error) {
    const HParams & hp = model.hparams();
    if (options.n_ctx < 1 || options.n_ctx > (1u << 24)) {
        *error = "context size " + std::to_string(options.n_ctx) + " is out of range";
        return nullptr;
    }
    if (options.n_batch < 1) {
        *error = "batch size must be at least 1";
        return nullptr;
    }
    // The transposed V cache is written element by element, which block
    // types cannot be; cache rows are split into heads, so a head must be
    // whole blocks.
    if (!options.flash_attn && ggml_is_quantized(options.type_v)) {
        *error = std::string("a V cache of type ") + ggml_type_name(options.type_v) + " needs flash attention (-fa)";
        return nullptr;
    }
    for (const auto & [type, what] : {std::pair{options.type_k, "K"}, std::pair{options.type_v, "V"}}) {
        if (hp.head_dim % uint32_t(ggml_blck_size(type)) != 0) {
            *error = std::string("KV cache type ") + ggml_type_name(type) + " for " + what +
                     " needs a head size that is a multiple of " + std::to_string(ggml_blck_size(type));
            return nullptr;
        }
    }

    std::unique_ptr<Session> s(new Session(model, backends, options));
    s->options_.n_batch = std::min(options.n_batch, options.n_ctx);

    // The KV cache, in a buffer per device holding that device's layers.
    const size_t  n_dev    = backends.size();
    const int64_t n_kv_emb = hp.n_embd_kv();
    s->kv_contexts_.assign(n_dev, nullptr);
    s->kv_bytes_.assign(n_dev, 0);
    s->k_.resize(hp.n_layer);
    s->v_.resize(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const size_t d = size_t(model.layer_device(il));
        if (s->kv_contexts_[d] == nullptr) {
            // The cache stays with its layers: a device that cannot write it
            // is an error here rather than a graph no backend can run.
            const std::string which = cache_writes_unsupported(backends.device(d), options, n_kv_emb);
            if (!which.empty()) {
                const ggml_type t          = which == "K" ? options.type_k : options.type_v;
                const char *    transposed = which == "V" && !options.flash_attn
                                                 ? " (without -fa, V is stored transposed)"
                                                 : "";
                *error = std::string("device ") + backends.name(d) + " cannot write a " + which + " cache of type " +
                         ggml_type_name(t) + transposed + "; choose another cache type or device";
                return nullptr;
            }
            ggml_init_params ip{};
            ip.mem_size        = ggml_tensor_overhead() * (2 * size_t(hp.n_layer) + 1);
            ip.no_alloc        = true;
            s->kv_contexts_[d] = ggml_init(ip);
            if (s->kv_contexts_[d] == nullptr) {
                *error = "out of memory for KV cache metadata";
                return nullptr;
            }
        }
        ggml_context * ctx = s->kv_contexts_[d];
        s->k_[il] = ggml_new_tensor_2d(ctx, options.type_k, n_kv_emb, options.n_ctx);
        // Without flash attention V is stored transposed (a row per channel)
        // so that the product with the attention weights reads rows.
        s->v_[il] = options.flash_attn ? ggml_new_tensor_2d(ctx, options.type_v, n_kv_emb, options.n_ctx)
                                       : ggml_new_tensor_2d(ctx, options.type_v, options.n_ctx, n_kv_emb);
        ggml_set_name(s->k_[il], ("cache_k_l" + std::to_string(il)).c_str());
        ggml_set_name(s->v_[il], ("cache_v_l" + std::to_string(il)).c_str());
    }
    for (size_t d = 0; d < n_dev; ++d) {
        if (s->kv_contexts_[d] == nullptr) {
            continue;
        }
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(
            s->kv_contexts_[d], ggml_backend_dev_buffer_type(backends.device(d)));
        if (buf == nullptr) {
            *error = std::string("not enough memory on device ") + backends.name(d) + " for the KV cache";
            return nullptr;
        }
        // Rows past the cached tokens are read (masked) when n_kv is rounded
        // up; zeros keep them finite.
        ggml_backend_buffer_clear(buf, 0);
        s->kv_buffers_.push_back(buf);
        s->kv_bytes_[d] = ggml_backend_buffer_get_size(buf);
    }

    // Graphs: about 35 nodes per layer; the rest is slack.
    s->graph_size_ = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, (64 + 4 * size_t(hp.n_expert_used)) * size_t(hp.n_layer) + 256);
    s->graph_meta_.resize(ggml_tensor_overhead() * s->graph_size_ + ggml_graph_overhead_custom(s->graph_size_, false));

    s->sched_ = ggml_backend_sched_new(backends.data(), nullptr, int(n_dev), s->graph_size_, false, true);
    if (s->sched_ == nullptr) {
        *error = "cannot create the scheduler";
        return nullptr;
    }
    if (!options.trace_path.empty()) {
        loom_sched_set_trace(s->sched_, options.trace_path.c_str());
    }

    // Compute memory for the largest batch over the whole context, planned
    // now so that running out of memory shows before any work.
    Inputs        in;
    ggml_cgraph * worst = s->build(s->options_.n_batch, options.n_ctx, &in);
    if (!ggml_backend_sched_reserve(s->sched_, worst)) {
        *error = "not enough memory for the compute buffers";
        return nullptr;
    }
    return s;
}

uint32_t Session::kv_length(uint32_t n_end) const {
    const uint32_t padded = (n_end + KV_PAD - 1) / KV_PAD * KV_PAD;
    return std::min(padded, options_.n_ctx);
}

namespace {

// The feed-forward part of a layer of experts (Mixtral-style, as llama.cpp's
// llama architecture computes it): a softmax over the router's logits, the
// n_expert_used most probable experts per token, their probabilities
// renormalised to sum to one, each chosen expert's SwiGLU through
// mul_mat_id, and the experts' outputs summed with those weights.
ggml_tensor * experts_ffn(ggml_context * ctx, ggml_cgraph * gf, const HParams & hp, const LayerWeights & w,
                          ggml_tensor * h, uint32_t il) {
    const int64_t n_embd = h->ne[0], n = h->ne[1];
    const int64_t n_exp = hp.n_expert, n_used = hp.n_expert_used;
    ggml_tensor * probs    = ggml_soft_max(ctx, ggml_mul_mat(ctx, w.ffn_gate_inp, h)); // [n_exp, n]
    ggml_tensor * selected = ggml_argsort_top_k(ctx, probs, int(n_used));              // [n_used, n]
    ggml_format_name(selected, "ffn_moe_topk-%u", il);
    ggml_tensor * weights = ggml_get_rows(ctx, ggml_reshape_3d(ctx, probs, 1, n_exp, n), selected); // [1, n_used, n]
    weights               = ggml_reshape_2d(ctx, weights, n_used, n);
    ggml_tensor * sum     = ggml_clamp(ctx, ggml_sum_rows(ctx, weights), 6.103515625e-5f, INFINITY);
    weights               = ggml_reshape_3d(ctx, ggml_div(ctx, weights, sum), 1, n_used, n);
    ggml_build_forward_expand(gf, weights);

    ggml_tensor * x    = ggml_reshape_3d(ctx, h, n_embd, 1, n);
    ggml_tensor * up   = ggml_mul_mat_id(ctx, w.ffn_up_exps, x, selected);   // [n_ff, n_used, n]
    ggml_tensor * gate = ggml_mul_mat_id(ctx, w.ffn_gate_exps, x, selected); // [n_ff, n_used, n]
    ggml_tensor * out  = ggml_mul_mat_id(ctx, w.ffn_down_exps, ggml_swiglu_split(ctx, gate, up), selected);
    out                = ggml_mul(ctx, out, weights); // [n_embd, n_used, n]
    ggml_build_forward_expand(gf, out);
    ggml_tensor * sum_out = ggml_view_2d(ctx, out, n_embd, n, out->nb[2], 0);
    for (int64_t i = 1; i < n_used; ++i) {
        sum_out = ggml_add(ctx, sum_out, ggml_view_2d(ctx, out, n_embd, n, out->nb[2], size_t(i) * out->nb[1]));
    }
    if (n_used == 1) {
        sum_out = ggml_cont(ctx, sum_out);
    }
    return ggml_format_name(sum_out, "ffn_moe_out-%u", il);
}

} // namespace

ggml_cgraph * Session::build(uint32_t n_tokens, uint32_t n_kv, Inputs * in) {
    const HParams & hp = model_.hparams();
    ggml_init_params ip{};
    ip.mem_size   = graph_meta_.size();
    ip.mem_buffer = graph_meta_.data();
    ip.no_alloc   = true;
    // The previous graph's tensors go: the scheduler is reset before each
    // graph, and nothing else refers to them.
    ggml_free(graph_ctx_);
    graph_ctx_         = ggml_init(ip);
    ggml_context * ctx = graph_ctx_;
    ggml_cgraph *  gf  = ggml_new_graph_custom(ctx, graph_size_, false);

    const int64_t n         = n_tokens;
    const int64_t head_dim  = hp.head_dim;
    const int64_t n_head    = hp.n_head;
    const int64_t n_head_kv = hp.n_head_kv;
    const int64_t n_embd_kv = hp.n_embd_kv();
    const int64_t n_ctx     = options_.n_ctx;
    const float   kq_scale  = 1.0f / std::sqrt(float(head_dim));
    const bool    fa        = options_.flash_attn;

    in->tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    in->pos    = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    in->k_idx  = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n);
    in->v_idx  = fa ? nullptr : ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n * n_embd_kv);
    in->mask   = ggml_new_tensor_2d(ctx, fa ? GGML_TYPE_F16 : GGML_TYPE_F32, n_kv, GGML_PAD(n, GGML_KQ_MASK_PAD));
    for (ggml_tensor * t : {in->tokens, in->pos, in->k_idx, in->v_idx, in->mask}) {
        if (t != nullptr) {
            ggml_set_input(t);
        }
    }
    ggml_set_name(in->tokens, "inp_tokens");
    ggml_set_name(in->pos, "inp_pos");
    ggml_set_name(in->k_idx, "inp_k_idx");
    if (in->v_idx != nullptr) ggml_set_name(in->v_idx, "inp_v_idx");
    ggml_set_name(in->mask, "inp_mask");

    // Names make the scheduler's debug output and traces readable.
    ggml_tensor * x = ggml_set_name(ggml_get_rows(ctx, model_.tok_embd(), in->tokens), "inp_embd");
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights & w    = model_.layers()[il];
        const bool           last = il + 1 == hp.n_layer;

        ggml_tensor * h = ggml_format_name(ggml_rms_norm(ctx, x, hp.rms_eps), "attn_rms-%u", il);
        h               = ggml_format_name(ggml_mul(ctx, h, w.attn_norm), "attn_norm-%u", il);

        // The products that read h come one after another in the graph,
        // where the CPU backend computes them as one node.
        ggml_tensor * q = ggml_mul_mat(ctx, w.wq, h);
        ggml_tensor * k = ggml_mul_mat(ctx, w.wk, h);
        ggml_tensor * v = ggml_mul_mat(ctx, w.wv, h); // [n_embd_kv, n]
        ggml_build_forward_expand(gf, q);
        ggml_build_forward_expand(gf, k);
        ggml_build_forward_expand(gf, v);
        q = ggml_reshape_3d(ctx, q, head_dim, n_head, n);
        k = ggml_reshape_3d(ctx, k, head_dim, n_head_kv, n);
        q = ggml_rope_ext(ctx, q, in->pos, nullptr, int(hp.n_rot), GGML_ROPE_TYPE_NORMAL, int(hp.n_ctx_train),
                          hp.rope_base, hp.rope_scale, 0.0f, 1.0f, 32.0f, 1.0f);
        k = ggml_rope_ext(ctx, k, in->pos, nullptr, int(hp.n_rot), GGML_ROPE_TYPE_NORMAL, int(hp.n_ctx_train),
                          hp.rope_base, hp.rope_scale, 0.0f, 1.0f, 32.0f, 1.0f);
        ggml_format_name(q, "Qcur-%u", il);
        ggml_format_name(k, "Kcur-%u", il);
        ggml_format_name(v, "Vcur-%u", il);

        // Into the cache. The attention reads views of set_rows' results, not
        // of the cache tensors, so the graph orders the reads after the writes.
        ggml_tensor * k_all = ggml_set_rows(ctx, k_[il], ggml_reshape_2d(ctx, k, n_embd_kv, n), in->k_idx);
        ggml_tensor * v_all = nullptr;
        if (fa) {
            v_all = ggml_set_rows(ctx, v_[il], v, in->k_idx);
        } else {
            // The transposed cache as rows of one element, one index per element.
            v_all = ggml_set_rows(ctx, ggml_reshape_2d(ctx, v_[il], 1, n_ctx * n_embd_kv),
                                  ggml_reshape_2d(ctx, v, 1, n_embd_kv * n), in->v_idx);
        }

        // K as [head_dim, n_kv, n_head_kv]: a head is a slice of each cache
        // row. Built as the first n_kv rows, cut into heads and permuted
        // (the strides of one 3-d view), so that a cache split by heads over
        // the members of a meta device (--split-mode tensor) splits it by heads.
        auto heads_of = [&](ggml_tensor * cache) {
            ggml_tensor * rows = ggml_view_2d(ctx, cache, n_embd_kv, n_kv, cache->nb[1], 0);
            return ggml_permute(ctx, ggml_reshape_3d(ctx, rows, head_dim, n_head_kv, n_kv), 0, 2, 1, 3);
        };
        const size_t  ev   = ggml_type_size(v_[il]->type);
        ggml_tensor * kc   = heads_of(k_all);
        ggml_tensor * qp   = ggml_permute(ctx, q, 0, 2, 1, 3); // [head_dim, n, n_head]
        ggml_tensor * attn = nullptr;
        if (fa) {
            ggml_tensor * vc = heads_of(v_all);
            attn = ggml_flash_attn_ext(ctx, qp, kc, vc, in->mask, kq_scale, 0.0f, 0.0f);
            ggml_flash_attn_ext_set_prec(attn, GGML_PREC_F32);
            attn = ggml_reshape_2d(ctx, attn, head_dim * n_head, n); // [head_dim, n_head, n] -> rows per token
        } else {
            ggml_tensor * kq = ggml_mul_mat(ctx, kc, qp); // [n_kv, n, n_head]
            kq               = ggml_soft_max_ext(ctx, kq, in->mask, kq_scale, 0.0f);
            ggml_tensor * vc = ggml_view_3d(ctx, v_all, n_kv, head_dim, n_head_kv, size_t(n_ctx) * ev,
                                            size_t(n_ctx) * ev * size_t(head_dim), 0);
            ggml_tensor * o = ggml_mul_mat(ctx, vc, kq); // [head_dim, n, n_head]
            attn = ggml_cont_2d(ctx, ggml_permute(ctx, o, 0, 2, 1, 3), head_dim * n_head, n);
        }
        ggml_format_name(attn, "kqv_out-%u", il);
        ggml_tensor * cur = ggml_format_name(ggml_mul_mat(ctx, w.wo, attn), "attn_out-%u", il);

        // Only the last token's logits are wanted: the rest of the last
        // layer works on its row alone.
        if (last && n > 1) {
            cur = ggml_view_2d(ctx, cur, cur->ne[0], 1, cur->nb[1], size_t(n - 1) * cur->nb[1]);
            x   = ggml_view_2d(ctx, x, x->ne[0], 1, x->nb[1], size_t(n - 1) * x->nb[1]);
        }
        x = ggml_add(ctx, x, cur);

        h                  = ggml_format_name(ggml_rms_norm(ctx, x, hp.rms_eps), "ffn_rms-%u", il);
        h                  = ggml_format_name(ggml_mul(ctx, h, w.ffn_norm), "ffn_norm-%u", il);
        if (hp.n_expert == 0) {
            ggml_tensor * gate = ggml_mul_mat(ctx, w.ffn_gate, h);
            ggml_tensor * up   = ggml_mul_mat(ctx, w.ffn_up, h);
            ggml_build_forward_expand(gf, gate);
            ggml_build_forward_expand(gf, up);
            x = ggml_add(ctx, x, ggml_mul_mat(ctx, w.ffn_down, ggml_swiglu_split(ctx, gate, up)));
        } else {
            x = ggml_add(ctx, experts_ffn(ctx, gf, hp, w, h, il), x);
        }
        ggml_format_name(x, "l_out-%u", il);
    }
    x          = ggml_set_name(ggml_mul(ctx, ggml_rms_norm(ctx, x, hp.rms_eps), model_.output_norm()), "result_norm");
    in->logits = ggml_mul_mat(ctx, model_.output(), x);
    ggml_set_name(in->logits, "logits");
    ggml_set_output(in->logits);
    ggml_build_forward_expand(gf, in->logits);
    return gf;
}

bool Session::eval(std::span<const int32_t> tokens, std::vector<float> * logits, std::string * error) {
    if (tokens.empty()) {
        *error = "nothing to evaluate";
        return false;
    }
    if (tokens.size() > size_t(options_.n_ctx - n_past_)) {
        *error = "the context of " + std::to_string(options_.n_ctx) + " tokens is full (" +
                 std::to_string(n_past_) + " cached, " + std::to_string(tokens.size()) + " more)";
        return false;
    }
    const uint32_t n_vocab = model_.hparams().n_vocab;
    for (int32_t id : tokens) {
        if (id < 0 || uint32_t(id) >= n_vocab) {
            *error = "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n_vocab);
            return false;
        }
    }
    const uint32_t start = n_past_;
    for (size_t i = 0; i < tokens.size(); i += options_.n_batch) {
        const size_t n = std::min(tokens.size() - i, size_t(options_.n_batch));
        if (!eval_batch(tokens.subspan(i, n), logits, error)) {
            n_past_ = start;
            return false;
        }
    }
    return true;
}

bool Session::eval_batch(std::span<const int32_t> tokens, std::vector<float> * logits, std::string * error) {
    const HParams & hp   = model_.hparams();
    const uint32_t  n    = uint32_t(tokens.size());
    const uint32_t  n_kv = kv_length(n_past_ + n);

    Inputs        in;
    ggml_cgraph * gf = build(n, n_kv, &in);
    ggml_backend_sched_reset(sched_);
    if (!ggml_backend_sched_alloc_graph(sched_, gf)) {
        *error = "cannot allocate the compute graph";
        return false;
    }

    pos_data_.resize(n);
    k_idx_data_.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
        pos_data_[i]   = int32_t(n_past_ + i);
        k_idx_data_[i] = int64_t(n_past_ + i);
    }
    ggml_backend_tensor_set(in.tokens, tokens.data(), 0, ggml_nbytes(in.tokens));
    ggml_backend_tensor_set(in.pos, pos_data_.data(), 0, ggml_nbytes(in.pos));
    ggml_backend_tensor_set(in.k_idx, k_idx_data_.data(), 0, ggml_nbytes(in.k_idx));
    if (in.v_idx != nullptr) {
        // Element (c, t) of the new V goes to channel row c, column n_past + t.
        const int64_t n_embd_kv = hp.n_embd_kv();
        v_idx_data_.resize(size_t(n_embd_kv) * n);
        for (uint32_t t = 0; t < n; ++t) {
            for (int64_t c = 0; c < n_embd_kv; ++c) {
                v_idx_data_[size_t(t) * size_t(n_embd_kv) + size_t(c)] =
                    c * int64_t(options_.n_ctx) + int64_t(n_past_ + t);
            }
        }
        ggml_backend_tensor_set(in.v_idx, v_idx_data_.data(), 0, ggml_nbytes(in.v_idx));
    }

    // Causal mask: token t (at n_past + t) sees cache rows [0, n_past + t].
    const size_t rows = size_t(in.mask->ne[1]);
    const float  ninf = -std::numeric_limits<float>::infinity();
    mask_f32_.assign(size_t(n_kv) * rows, 0.0f); // padding rows: anything finite
    for (uint32_t t = 0; t < n; ++t) {
        const size_t row = size_t(t) * n_kv;
        std::fill(mask_f32_.begin() + ptrdiff_t(row + n_past_ + t + 1), mask_f32_.begin() + ptrdiff_t(row + n_kv),
                  ninf);
    }
    if (in.mask->type == GGML_TYPE_F16) {
        mask_f16_.resize(mask_f32_.size());
        ggml_fp32_to_fp16_row(mask_f32_.data(), mask_f16_.data(), int64_t(mask_f32_.size()));
        ggml_backend_tensor_set(in.mask, mask_f16_.data(), 0, ggml_nbytes(in.mask));
    } else {
        ggml_backend_tensor_set(in.mask, mask_f32_.data(), 0, ggml_nbytes(in.mask));
    }

    const ggml_status st = ggml_backend_sched_graph_compute(sched_, gf);
    if (st != GGML_STATUS_SUCCESS) {
        *error = std::string("the computation ") + status_text(st);
        return false;
    }
    logits->resize(hp.n_vocab);
    ggml_backend_tensor_get(in.logits, logits->data(), 0, size_t(hp.n_vocab) * sizeof(float));
    n_past_ += n;
    return true;
}

size_t Session::kv_bytes(size_t device) const {
    return device < kv_bytes_.size() ? kv_bytes_[device] : 0;
}

size_t Session::compute_bytes(size_t device) const {
    return device < backends_.size() ? ggml_backend_sched_get_buffer_size(sched_, backends_.backend(device)) : 0;
}

int Session::n_splits() const {
    return ggml_backend_sched_get_n_splits(sched_);
}

bool Session::write_trace() {
    return options_.trace_path.empty() || loom_sched_write_trace(sched_);
}

} // namespace loom_run
