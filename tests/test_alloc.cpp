// The graph allocator (ggml_gallocr) and whole-context allocation.
//
// Every graph is computed twice with the CPU backend: once with each tensor
// in memory of its own (ggml_backend_alloc_ctx_tensors), once in the memory
// the graph allocator plans. The results must be bit-identical. The planned
// run computes one node at a time and, right after each node, fills every
// region the plan releases there with 0xff bytes (a NaN as f32 and f16), so
// a tensor released before its last reader changes the results even when
// nothing happened to reuse its memory. The planned buffers also start out
// filled with 0xff, so reading memory nobody wrote shows up the same way.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../src/alloc/gallocr_inspect.h"
#include "../src/backend/backend_impl.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "log_capture.h"

namespace {

using loomtest::LogCapture;

// ---- a host buffer type with a chosen alignment and maximum size ----------

class TestBuffer final : public loom::HostBuffer {
  public:
    TestBuffer(ggml_backend_buffer_type * type, void * data, size_t size) : HostBuffer(type, data, size) {}
    ~TestBuffer() override { std::free(data_); }
};

class TestBufferType final : public ggml_backend_buffer_type {
  public:
    TestBufferType(const char * name, size_t alignment, size_t max_size = SIZE_MAX)
        : ggml_backend_buffer_type(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)), name_(name),
          alignment_(alignment), max_size_(max_size) {}

    const char * name() const override { return name_; }
    size_t       alignment() const override { return alignment_; }
    size_t       max_size() const override { return max_size_; }
    bool         is_host() const override { return true; }

    ggml_backend_buffer * alloc_buffer(size_t size) override {
        if (fail) {
            return nullptr;
        }
        ++n_allocs;
        void * data = nullptr;
        if (size > 0) {
            data = std::aligned_alloc(alignment_, (size + alignment_ - 1) / alignment_ * alignment_);
        }
        return new TestBuffer(this, data, size);
    }

    int  n_allocs = 0;
    bool fail     = false;

  private:
    const char * name_;
    size_t       alignment_;
    size_t       max_size_;
};

// ---- graphs and the two ways of computing them ----------------------------

struct Fill {
    ggml_tensor * t;
    int32_t       int_range; // I32 tensors: values in [0, int_range)
};

struct Built {
    ggml_cgraph *              graph = nullptr;
    std::vector<Fill>          fills;   // weights, leafs and inputs: set before computing
    std::vector<ggml_tensor *> outputs; // compared between the runs
};

// Builds a graph: weights in wctx (allocated by the test), everything else in ctx.
using Builder = std::function<Built(ggml_context * wctx, ggml_context * ctx)>;

struct Contexts {
    Contexts() {
        ggml_init_params p{size_t(8) << 20, nullptr, true};
        w = ggml_init(p);
        g = ggml_init(p);
    }
    ~Contexts() {
        ggml_free(w);
        ggml_free(g);
    }
    ggml_context * w;
    ggml_context * g;
};

struct BufferDeleter {
    void operator()(ggml_backend_buffer_t b) const { ggml_backend_buffer_free(b); }
};
using BufferPtr = std::unique_ptr<ggml_backend_buffer, BufferDeleter>;

struct GallocrDeleter {
    void operator()(ggml_gallocr_t g) const { ggml_gallocr_free(g); }
};
using GallocrPtr = std::unique_ptr<ggml_gallocr, GallocrDeleter>;

ggml_backend_t cpu_backend() {
    static ggml_backend_t b = [] {
        ggml_backend_t be = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(be, 2);
        return be;
    }();
    return b;
}

void fill_all(const std::vector<Fill> & fills) {
    for (size_t k = 0; k < fills.size(); ++k) {
        ggml_tensor * t = fills[k].t;
        std::mt19937  rng(unsigned(1000 + k));
        const int64_t n = ggml_nelements(t);
        if (t->type == GGML_TYPE_I32) {
            std::uniform_int_distribution<int32_t> d(0, fills[k].int_range - 1);
            std::vector<int32_t>                   v(static_cast<size_t>(n));
            for (auto & x : v) x = d(rng);
            ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(int32_t));
        } else if (t->type == GGML_TYPE_F16) {
            std::uniform_real_distribution<float> d(-1.0f, 1.0f);
            std::vector<ggml_fp16_t>              v(static_cast<size_t>(n));
            for (auto & x : v) x = ggml_fp32_to_fp16(d(rng));
            ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(ggml_fp16_t));
        } else {
            ASSERT_EQ(t->type, GGML_TYPE_F32);
            std::uniform_real_distribution<float> d(-1.0f, 1.0f);
            std::vector<float>                    v(static_cast<size_t>(n));
            for (auto & x : v) x = d(rng);
            ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
        }
    }
}

std::vector<std::vector<uint8_t>> read_all(const std::vector<ggml_tensor *> & ts) {
    std::vector<std::vector<uint8_t>> out;
    for (ggml_tensor * t : ts) {
        std::vector<uint8_t> bytes(ggml_nbytes(t));
        if (!bytes.empty()) {
            ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
        }
        out.push_back(std::move(bytes));
    }
    return out;
}

// Every tensor in memory of its own, the graph computed at once.
std::vector<std::vector<uint8_t>> run_reference(const Builder & build) {
    Contexts  c;
    Built     b = build(c.w, c.g);
    BufferPtr wb(ggml_backend_alloc_ctx_tensors(c.w, cpu_backend()));
    BufferPtr gb(ggml_backend_alloc_ctx_tensors(c.g, cpu_backend()));
    fill_all(b.fills);
    EXPECT_EQ(ggml_backend_graph_compute(cpu_backend(), b.graph), GGML_STATUS_SUCCESS);
    return read_all(b.outputs);
}

// Computes graph one node at a time, poisoning what the plan releases.
void compute_poisoned(ggml_gallocr_t galloc, ggml_cgraph * graph) {
    ggml_init_params p{ggml_graph_overhead_custom(1, false) + 1024, nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_cgraph *    one = ggml_new_graph_custom(ctx, 1, false);
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        ggml_graph_clear(one);
        ggml_graph_add_node(one, ggml_graph_node(graph, i));
        ASSERT_EQ(ggml_backend_graph_compute(cpu_backend(), one), GGML_STATUS_SUCCESS) << "node " << i;
        for (const loom::GallocrRegion & r : loom::gallocr_regions_released_after(galloc, i)) {
            std::memset(static_cast<char *>(ggml_backend_buffer_get_base(r.buffer)) + r.offset, 0xff, r.size);
        }
    }
    ggml_free(ctx);
}

// The buffers the allocator placed graph's tensors in.
std::set<ggml_backend_buffer_t> planned_buffers(ggml_cgraph * graph, const std::set<ggml_backend_buffer_t> & skip) {
    std::set<ggml_backend_buffer_t> out;
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        for (ggml_tensor * t : {n, n->src[0], n->src[1], n->src[2]}) {
            if (t != nullptr && t->buffer != nullptr && t->view_src == nullptr && skip.count(t->buffer) == 0) {
                out.insert(t->buffer);
            }
        }
    }
    return out;
}

struct PlannedRun {
    std::vector<std::vector<uint8_t>> results;
    loom::GallocrPlanStats            stats;
    bool                              allocated = false;
};

struct PlanOptions {
    ggml_gallocr_t                     galloc = nullptr; // NULL: a fresh allocator on the CPU buffer type
    std::function<void(const Built &)> before_alloc;     // after the weights are allocated
    std::function<void(const Built &)> after_alloc;      // before the data is set
};

// The graph in memory planned by the allocator, computed node by node with
// released regions poisoned.
PlannedRun run_planned(const Builder & build, const PlanOptions & opt = {}) {
    GallocrPtr     owned;
    ggml_gallocr_t galloc = opt.galloc;
    if (galloc == nullptr) {
        owned.reset(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
        galloc = owned.get();
    }
    Contexts  c;
    Built     b = build(c.w, c.g);
    BufferPtr wb(ggml_backend_alloc_ctx_tensors(c.w, cpu_backend()));
    if (opt.before_alloc) {
        opt.before_alloc(b);
    }
    std::vector<void *> weight_data;
    for (ggml_tensor * t = ggml_get_first_tensor(c.w); t != nullptr; t = ggml_get_next_tensor(c.w, t)) {
        weight_data.push_back(t->data);
    }
    PlannedRun run;
    run.allocated = ggml_gallocr_alloc_graph(galloc, b.graph);
    EXPECT_TRUE(run.allocated);
    if (!run.allocated) {
        return run;
    }
    run.stats = loom::gallocr_last_plan_stats(galloc, 0);

    size_t k = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(c.w); t != nullptr; t = ggml_get_next_tensor(c.w, t)) {
        EXPECT_EQ(t->data, weight_data[k++]) << "the allocator moved pre-allocated tensor " << t->name;
    }
    std::set<ggml_backend_buffer_t> skip;
    if (wb) {
        skip.insert(wb.get());
    }
    for (ggml_backend_buffer_t buf : planned_buffers(b.graph, skip)) {
        ggml_backend_buffer_clear(buf, 0xff);
    }
    if (opt.after_alloc) {
        opt.after_alloc(b);
    }
    fill_all(b.fills);
    compute_poisoned(galloc, b.graph);
    run.results = read_all(b.outputs);
    return run;
}

void expect_same(const std::vector<std::vector<uint8_t>> & want, const std::vector<std::vector<uint8_t>> & got) {
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(want[i].size(), got[i].size()) << "output " << i;
        EXPECT_TRUE(want[i] == got[i]) << "output " << i << " differs";
    }
}

// ---- graph builders --------------------------------------------------------

ggml_tensor * weight(ggml_context * w, Built & b, int64_t ne0, int64_t ne1) {
    ggml_tensor * t = ggml_new_tensor_2d(w, GGML_TYPE_F32, ne0, ne1);
    b.fills.push_back({t, 0});
    return t;
}

ggml_tensor * input(ggml_context * g, Built & b, int64_t ne0, int64_t ne1, bool flag = true) {
    ggml_tensor * t = ggml_new_tensor_2d(g, GGML_TYPE_F32, ne0, ne1);
    if (flag) {
        ggml_set_input(t);
    }
    b.fills.push_back({t, 0});
    return t;
}

Built finish(ggml_context * g, Built b) {
    if (b.graph == nullptr) {
        b.graph = ggml_new_graph(g);
    }
    for (ggml_tensor * o : b.outputs) {
        ggml_set_output(o);
        ggml_build_forward_expand(b.graph, o);
    }
    return b;
}

// In-place-capable ops one after another, with a tensor read twice (so not
// reusable in place) and one read once (reusable).
Built build_inplace_chain(ggml_context * w, ggml_context * g) {
    Built         b;
    ggml_tensor * a = input(g, b, 64, 8);
    ggml_tensor * c = weight(w, b, 64, 8);
    ggml_tensor * x = ggml_add(g, a, c);
    ggml_tensor * y = ggml_silu(g, x);
    ggml_tensor * z = ggml_scale(g, y, 0.5f);
    ggml_tensor * m = ggml_mul(g, z, c);
    ggml_tensor * s = ggml_sqr(g, m);
    ggml_tensor * r = ggml_rms_norm(g, s, 1e-5f);
    ggml_tensor * p = ggml_soft_max(g, r);
    ggml_tensor * t = ggml_tanh(g, p);
    ggml_tensor * u = ggml_sub(g, t, m); // m read twice
    ggml_set_name(x, "x");
    ggml_set_name(y, "y");
    b.outputs = {u};
    return finish(g, b);
}

// Views of views of a computed tensor, read long after the tensor's direct
// readers are done, with large intermediates in between.
Built build_views(ggml_context * w, ggml_context * g) {
    Built         b;
    ggml_tensor * a  = input(g, b, 32, 16);
    ggml_tensor * w1 = weight(w, b, 32, 48);
    ggml_tensor * w2 = weight(w, b, 32, 96);
    ggml_tensor * m  = ggml_mul_mat(g, w1, a);                                      // [48, 16]
    ggml_tensor * v1 = ggml_view_2d(g, m, 24, 16, m->nb[1], 24 * sizeof(float));    // right half
    ggml_tensor * v2 = ggml_view_2d(g, v1, 8, 4, v1->nb[1], 8 * sizeof(float));     // of the view
    ggml_tensor * r  = ggml_reshape_2d(g, ggml_cont(g, v2), 4, 8);
    ggml_tensor * d  = ggml_tanh(g, m); // m's last direct reader
    ggml_tensor * e  = ggml_mul_mat(g, w2, a);                                      // [96, 16]
    ggml_tensor * f  = ggml_silu(g, e);
    ggml_tensor * h  = ggml_mul_mat(g, w2, ggml_tanh(g, a));
    ggml_tensor * k  = ggml_add(g, f, h);
    ggml_tensor * l  = ggml_mul(g, ggml_cont(g, v1), ggml_view_2d(g, k, 24, 16, k->nb[1], 0));
    b.outputs        = {l, r, ggml_sum_rows(g, d)};
    return finish(g, b);
}

// Permuted and transposed operands: attention over a few heads.
Built build_attention(ggml_context * w, ggml_context * g) {
    Built         b;
    const int64_t hd = 8, nh = 4, nt = 6;
    ggml_tensor * x  = input(g, b, hd * nh, nt);
    ggml_tensor * wq = weight(w, b, hd * nh, hd * nh);
    ggml_tensor * wk = weight(w, b, hd * nh, hd * nh);
    ggml_tensor * wv = weight(w, b, hd * nh, hd * nh);
    ggml_tensor * q  = ggml_permute(g, ggml_reshape_3d(g, ggml_mul_mat(g, wq, x), hd, nh, nt), 0, 2, 1, 3);
    ggml_tensor * k  = ggml_permute(g, ggml_reshape_3d(g, ggml_mul_mat(g, wk, x), hd, nh, nt), 0, 2, 1, 3);
    ggml_tensor * v  = ggml_reshape_3d(g, ggml_mul_mat(g, wv, x), hd, nh, nt);
    ggml_tensor * vt = ggml_cont(g, ggml_permute(g, v, 1, 2, 0, 3)); // [nt, hd, nh]
    ggml_tensor * kq = ggml_soft_max_ext(g, ggml_mul_mat(g, k, q), nullptr, 0.35f, 0.0f);
    ggml_tensor * o  = ggml_permute(g, ggml_mul_mat(g, vt, kq), 0, 2, 1, 3);
    ggml_tensor * y  = ggml_cont_2d(g, o, hd * nh, nt);
    b.outputs        = {ggml_add(g, y, ggml_cont(g, ggml_transpose(g, ggml_transpose(g, x))))};
    return finish(g, b);
}

// Several outputs at different depths, one of them a view, one read again
// by later nodes; an input read only by the last node.
Built build_outputs_and_late_input(ggml_context * w, ggml_context * g) {
    Built         b;
    ggml_tensor * a    = input(g, b, 40, 10);
    ggml_tensor * late = input(g, b, 40, 10);
    ggml_tensor * wa   = weight(w, b, 40, 40);
    ggml_tensor * o1   = ggml_silu(g, ggml_mul_mat(g, wa, a));
    ggml_tensor * cur  = o1;
    for (int i = 0; i < 6; ++i) {
        cur = ggml_tanh(g, ggml_add(g, ggml_mul_mat(g, wa, cur), o1));
    }
    ggml_tensor * o2 = ggml_view_2d(g, cur, 20, 10, cur->nb[1], 0);
    ggml_tensor * o3 = ggml_mul(g, ggml_scale(g, cur, 2.0f), late);
    ggml_set_name(late, "late");
    ggml_set_name(o1, "o1");
    b.outputs = {o1, o2, o3};
    return finish(g, b);
}

// Two transformer layers: token embeddings, rotary positions, a mask, in
// place rms_norm / rope / softmax, a gated feed-forward; a KV cache that the
// caller owns, written through views and read through views.
Built build_transformer(ggml_context * w, ggml_context * g, int64_t n_tokens) {
    Built         b;
    b.graph                = ggml_new_graph(g); // the cache writes go in first
    const int64_t hd = 8, nh = 4, ne = hd * nh, nff = 64, nv = 50, nl = 2, n_past = 3;
    const int64_t nkv = n_past + n_tokens;
    ggml_tensor * tok_embd = weight(w, b, ne, nv);
    ggml_tensor * cache_k  = ggml_new_tensor_1d(w, GGML_TYPE_F32, ne * nkv * nl);
    ggml_tensor * cache_v  = ggml_new_tensor_1d(w, GGML_TYPE_F32, ne * nkv * nl);
    b.fills.push_back({cache_k, 0});
    b.fills.push_back({cache_v, 0});
    ggml_tensor * tokens = ggml_new_tensor_1d(g, GGML_TYPE_I32, n_tokens);
    ggml_tensor * pos    = ggml_new_tensor_1d(g, GGML_TYPE_I32, n_tokens);
    ggml_tensor * mask   = ggml_new_tensor_2d(g, GGML_TYPE_F32, nkv, n_tokens);
    for (ggml_tensor * t : {tokens, pos, mask}) {
        ggml_set_input(t);
    }
    b.fills.push_back({tokens, int32_t(nv)});
    b.fills.push_back({pos, 64});
    b.fills.push_back({mask, 0});

    ggml_tensor * cur = ggml_get_rows(g, tok_embd, tokens);
    for (int64_t l = 0; l < nl; ++l) {
        ggml_tensor * n  = ggml_mul(g, ggml_rms_norm(g, cur, 1e-5f), weight(w, b, ne, 1));
        ggml_tensor * q  = ggml_reshape_3d(g, ggml_mul_mat(g, weight(w, b, ne, ne), n), hd, nh, n_tokens);
        ggml_tensor * k  = ggml_reshape_3d(g, ggml_mul_mat(g, weight(w, b, ne, ne), n), hd, nh, n_tokens);
        ggml_tensor * v  = ggml_mul_mat(g, weight(w, b, ne, ne), n);
        q                = ggml_rope_ext(g, q, pos, nullptr, int(hd), GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f,
                                         1.0f, 32.0f, 1.0f);
        k                = ggml_rope_ext(g, k, pos, nullptr, int(hd), GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f,
                                         1.0f, 32.0f, 1.0f);
        const size_t  lo = size_t(l * ne * nkv) * sizeof(float);
        ggml_tensor * ck = ggml_cpy(g, k, ggml_view_1d(g, cache_k, ne * n_tokens, lo + n_past * ne * sizeof(float)));
        ggml_tensor * cv = ggml_cpy(g, v, ggml_view_1d(g, cache_v, ne * n_tokens, lo + n_past * ne * sizeof(float)));
        ggml_build_forward_expand(b.graph, ck);
        ggml_build_forward_expand(b.graph, cv);
        ggml_tensor * K  = ggml_view_3d(g, cache_k, hd, nkv, nh, ne * sizeof(float), hd * sizeof(float), lo);
        ggml_tensor * V  = ggml_view_3d(g, cache_v, hd, nkv, nh, ne * sizeof(float), hd * sizeof(float), lo);
        ggml_tensor * kq = ggml_mul_mat(g, K, ggml_permute(g, q, 0, 2, 1, 3)); // [nkv, nt, nh]
        kq               = ggml_soft_max_ext(g, kq, mask, 0.35f, 0.0f);
        ggml_tensor * vt = ggml_cont(g, ggml_permute(g, V, 1, 0, 2, 3)); // [nkv, hd, nh]
        ggml_tensor * o  = ggml_cont_2d(g, ggml_permute(g, ggml_mul_mat(g, vt, kq), 0, 2, 1, 3), ne, n_tokens);
        ggml_tensor * a  = ggml_add(g, ggml_mul_mat(g, weight(w, b, ne, ne), o), cur);
        ggml_tensor * f  = ggml_mul(g, ggml_rms_norm(g, a, 1e-5f), weight(w, b, ne, 1));
        ggml_tensor * gt = ggml_silu(g, ggml_mul_mat(g, weight(w, b, ne, nff), f));
        ggml_tensor * up = ggml_mul_mat(g, weight(w, b, ne, nff), f);
        cur              = ggml_add(g, ggml_mul_mat(g, weight(w, b, nff, ne), ggml_mul(g, gt, up)), a);
    }
    b.outputs = {ggml_mul_mat(g, weight(w, b, ne, nv), ggml_rms_norm(g, cur, 1e-5f))};
    return finish(g, b);
}

Builder transformer(int64_t n_tokens) {
    return [n_tokens](ggml_context * w, ggml_context * g) { return build_transformer(w, g, n_tokens); };
}

// A random graph of element-wise ops, matrix products, reshapes and
// transposes over one shape, with random inputs and outputs: lifetimes of
// every length and many in-place candidates.
Built build_random(ggml_context * w, ggml_context * g, unsigned seed) {
    std::mt19937  rng(seed);
    Built         b;
    const int64_t n0 = 16, n1 = 6;
    auto          pick = [&](const std::vector<ggml_tensor *> & v) {
        // Mostly recent tensors (chains), sometimes old ones (long lifetimes).
        std::uniform_int_distribution<size_t> recent(v.size() > 3 ? v.size() - 3 : 0, v.size() - 1);
        std::uniform_int_distribution<size_t> any(0, v.size() - 1);
        return v[std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? any(rng) : recent(rng)];
    };
    std::vector<ggml_tensor *> avail;
    const int                  n_inputs = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < n_inputs; ++i) {
        avail.push_back(input(g, b, n0, n1, std::uniform_int_distribution<int>(0, 1)(rng) == 0));
    }
    // Every input reaches the last output (a tensor outside the graph gets no memory).
    ggml_tensor * first = ggml_tanh(g, avail[0]);
    for (int i = 1; i < n_inputs; ++i) {
        first = ggml_add(g, first, avail[size_t(i)]);
    }
    avail.push_back(first);
    ggml_tensor * wm    = weight(w, b, n0, n0);
    const int     n_ops = std::uniform_int_distribution<int>(10, 40)(rng);
    for (int i = 0; i < n_ops; ++i) {
        ggml_tensor * a = pick(avail);
        ggml_tensor * r = nullptr;
        switch (std::uniform_int_distribution<int>(0, 8)(rng)) {
            case 0: r = ggml_add(g, a, pick(avail)); break;
            case 1: r = ggml_mul(g, a, pick(avail)); break;
            case 2: r = ggml_sub(g, a, pick(avail)); break;
            case 3: r = ggml_tanh(g, a); break;
            case 4: r = ggml_silu(g, a); break;
            case 5: r = ggml_scale(g, a, 0.5f); break;
            case 6: r = ggml_reshape_2d(g, ggml_tanh(g, ggml_reshape_2d(g, a, n1, n0)), n0, n1); break;
            case 7: r = ggml_scale(g, ggml_mul_mat(g, wm, a), 1.0f / float(n0)); break;
            default: r = ggml_cont(g, ggml_transpose(g, ggml_cont(g, ggml_transpose(g, a)))); break;
        }
        avail.push_back(r);
        if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
            b.outputs.push_back(r);
        }
    }
    b.outputs.push_back(ggml_tanh(g, ggml_add(g, avail.back(), first)));
    return finish(g, b);
}

// [data, data + nbytes) of two tensors intersect.
bool overlap(const ggml_tensor * a, const ggml_tensor * b) {
    const char * pa = static_cast<const char *>(a->data);
    const char * pb = static_cast<const char *>(b->data);
    return ggml_nbytes(a) > 0 && ggml_nbytes(b) > 0 && pa < pb + ggml_nbytes(b) && pb < pa + ggml_nbytes(a);
}

int position(ggml_cgraph * graph, const ggml_tensor * t) {
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        if (ggml_graph_node(graph, i) == t) return i;
    }
    return -1;
}

void check_against_reference(const Builder & build, const PlanOptions & opt = {}) {
    const auto want = run_reference(build);
    const auto got  = run_planned(build, opt);
    expect_same(want, got.results);
}

} // namespace

// ---- results identical to every tensor in memory of its own -----------------

TEST(Gallocr, InplaceChain) {
    PlanOptions opt;
    opt.after_alloc = [](const Built & b) {
        ggml_tensor * x = ggml_graph_get_tensor(b.graph, "x");
        ggml_tensor * y = ggml_graph_get_tensor(b.graph, "y");
        ASSERT_NE(x, nullptr);
        ASSERT_NE(y, nullptr);
        EXPECT_EQ(x->data, y->data) << "silu(x) should be computed in x's memory";
    };
    check_against_reference(build_inplace_chain, opt);
    const auto run = run_planned(build_inplace_chain);
    EXPECT_GT(run.stats.n_inplace, 3u);
}

TEST(Gallocr, ViewsOfViews) {
    check_against_reference(build_views);
}

TEST(Gallocr, PermutedOperands) {
    check_against_reference(build_attention);
}

TEST(Gallocr, MultipleOutputsAndLateInput) {
    check_against_reference(build_outputs_and_late_input);
}

TEST(Gallocr, TransformerWithKvCache) {
    check_against_reference(transformer(1));
    check_against_reference(transformer(5));
}

TEST(Gallocr, RandomGraphs) {
    for (unsigned seed = 1; seed <= 40; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        check_against_reference([seed](ggml_context * w, ggml_context * g) { return build_random(w, g, seed); });
    }
}

// ---- flags and pre-allocated tensors -------------------------------------------

TEST(Gallocr, OutputsAndInputsKeepTheirMemory) {
    PlanOptions opt;
    opt.after_alloc = [](const Built & b) {
        ggml_tensor * o1   = ggml_graph_get_tensor(b.graph, "o1");
        ggml_tensor * late = ggml_graph_get_tensor(b.graph, "late");
        ASSERT_NE(o1, nullptr);
        ASSERT_NE(late, nullptr);
        const int p1 = position(b.graph, o1);
        for (int i = 0; i < ggml_graph_n_nodes(b.graph); ++i) {
            ggml_tensor * n = ggml_graph_node(b.graph, i);
            if (n->view_src != nullptr) {
                continue;
            }
            // The input is read by the last node only: nothing may be placed over it.
            EXPECT_FALSE(overlap(n, late)) << n->name << " overlaps the input";
            // The output is never released: nothing computed after it may be placed over it.
            if (i > p1) {
                EXPECT_FALSE(overlap(n, o1)) << n->name << " overlaps output o1";
            }
        }
    };
    check_against_reference(build_outputs_and_late_input, opt);
}

TEST(Gallocr, InputsAreNotComputedInPlace) {
    auto build = [](ggml_context * w, ggml_context * g, bool flag) {
        (void) w;
        Built         b;
        ggml_tensor * a = input(g, b, 32, 4, flag);
        ggml_tensor * y = ggml_silu(g, a);
        ggml_set_name(a, "a");
        ggml_set_name(y, "y");
        b.outputs = {ggml_tanh(g, y)};
        return finish(g, b);
    };
    for (bool flag : {true, false}) {
        SCOPED_TRACE(flag ? "input" : "plain leaf");
        PlanOptions opt;
        opt.after_alloc = [flag](const Built & b) {
            // A leaf without the flag is the allocator's like any other tensor.
            EXPECT_EQ(ggml_graph_get_tensor(b.graph, "a")->data == ggml_graph_get_tensor(b.graph, "y")->data, !flag);
        };
        check_against_reference([&](ggml_context * w, ggml_context * g) { return build(w, g, flag); }, opt);
    }
}

TEST(Gallocr, PreallocatedNodeIsNotMoved) {
    // Node y gets memory of the test's own before the allocator runs.
    BufferPtr   own(ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 4096));
    void *      where = nullptr;
    PlanOptions opt;
    opt.before_alloc = [&](const Built & b) {
        ggml_tensor * y = ggml_graph_get_tensor(b.graph, "y");
        where           = static_cast<char *>(ggml_backend_buffer_get_base(own.get())) + 128;
        ASSERT_EQ(ggml_backend_tensor_alloc(own.get(), y, where), GGML_STATUS_SUCCESS);
    };
    opt.after_alloc = [&](const Built & b) {
        ggml_tensor * y = ggml_graph_get_tensor(b.graph, "y");
        EXPECT_EQ(y->data, where);
        EXPECT_EQ(y->buffer, own.get());
    };
    check_against_reference(build_inplace_chain, opt);
}

// ---- edge cases --------------------------------------------------------------

TEST(Gallocr, ZeroSizedTensors) {
    auto build = [](ggml_context * w, ggml_context * g) {
        (void) w;
        Built         b;
        ggml_tensor * e  = ggml_new_tensor_2d(g, GGML_TYPE_F32, 0, 4);
        ggml_set_input(e);
        ggml_tensor * e2 = ggml_add(g, ggml_silu(g, e), e);
        ggml_tensor * a  = input(g, b, 8, 2);
        b.outputs        = {ggml_tanh(g, a), e2};
        return finish(g, b);
    };
    check_against_reference(build);
}

TEST(Gallocr, EmptyGraph) {
    ggml_init_params p{ggml_graph_overhead() + 1024, nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_cgraph *    g   = ggml_new_graph(ctx);
    GallocrPtr       galloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
    EXPECT_TRUE(ggml_gallocr_reserve(galloc.get(), g));
    EXPECT_TRUE(ggml_gallocr_alloc_graph(galloc.get(), g));
    EXPECT_EQ(ggml_gallocr_get_buffer_size(galloc.get(), 0), 0u);
    EXPECT_EQ(ggml_backend_graph_compute(cpu_backend(), g), GGML_STATUS_SUCCESS);
    ggml_free(ctx);
}

TEST(Gallocr, GrowsForALargerGraphAndKeepsItsBuffer) {
    TestBufferType buft("grow", 64);
    GallocrPtr     galloc(ggml_gallocr_new(&buft));
    PlanOptions    opt;
    opt.galloc = galloc.get();

    check_against_reference(transformer(2), opt);
    const size_t small = ggml_gallocr_get_buffer_size(galloc.get(), 0);
    EXPECT_GT(small, 0u);
    EXPECT_EQ(buft.n_allocs, 1);

    {
        LogCapture log;
        check_against_reference(transformer(8), opt);
        EXPECT_TRUE(log.contains("growing")) << "growth is logged";
    }
    const size_t large = ggml_gallocr_get_buffer_size(galloc.get(), 0);
    EXPECT_GT(large, small);
    EXPECT_EQ(buft.n_allocs, 2);

    // A smaller graph again: planned anew, but the buffer stays.
    check_against_reference(transformer(2), opt);
    EXPECT_EQ(ggml_gallocr_get_buffer_size(galloc.get(), 0), large);
    EXPECT_EQ(buft.n_allocs, 2);
}

TEST(Gallocr, ReusesThePlanForTheSameStructure) {
    GallocrPtr  galloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
    PlanOptions opt;
    opt.galloc  = galloc.get();
    const auto first = run_planned(transformer(4), opt);
    const auto again = run_planned(transformer(4), opt);
    EXPECT_EQ(again.stats.n_plans, first.stats.n_plans);
    expect_same(first.results, again.results);
}

TEST(Gallocr, PlansAnewWhenTheStructureChanges) {
    // Same numbers of nodes and leafs and the same sizes; in the first graph
    // t2 can take t1's memory, in the second t1 is still needed.
    auto build = [](ggml_context * w, ggml_context * g, bool chain) {
        (void) w;
        Built         b;
        ggml_tensor * a  = input(g, b, 64, 4);
        ggml_tensor * t1 = ggml_tanh(g, a);
        ggml_tensor * t2 = ggml_tanh(g, chain ? t1 : a);
        b.outputs        = {ggml_add(g, chain ? t2 : t1, t2)};
        return finish(g, b);
    };
    GallocrPtr  galloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
    PlanOptions opt;
    opt.galloc = galloc.get();
    Builder chain = [&](ggml_context * w, ggml_context * g) { return build(w, g, true); };
    Builder fork  = [&](ggml_context * w, ggml_context * g) { return build(w, g, false); };
    const auto first = run_planned(chain, opt);
    expect_same(run_reference(chain), first.results);
    const auto second = run_planned(fork, opt);
    expect_same(run_reference(fork), second.results);
    EXPECT_EQ(second.stats.n_plans, first.stats.n_plans + 1);
}

// ---- buffers -------------------------------------------------------------------

TEST(Gallocr, MultipleBufferTypesGetSeparateBuffers) {
    TestBufferType a("A", 32), b("B", 128);
    ggml_backend_buffer_type_t bufts[2] = {&a, &b};
    GallocrPtr                 galloc(ggml_gallocr_new_n(bufts, 2));
    std::vector<int>           node_ids;
    PlanOptions                opt;
    opt.galloc       = galloc.get();
    opt.before_alloc = [&](const Built & built) {
        // Blocks of ten nodes alternate between the two buffer types.
        node_ids.resize(size_t(ggml_graph_n_nodes(built.graph)));
        for (size_t i = 0; i < node_ids.size(); ++i) node_ids[i] = int(i / 10 % 2);
        ASSERT_TRUE(ggml_gallocr_reserve_n(galloc.get(), built.graph, node_ids.data(), nullptr));
    };
    opt.after_alloc = [&](const Built & built) {
        for (int i = 0; i < ggml_graph_n_nodes(built.graph); ++i) {
            ggml_tensor * n = ggml_graph_node(built.graph, i);
            if (n->view_src == nullptr && n->buffer != nullptr && ggml_backend_buffer_get_type(n->buffer) != ggml_backend_cpu_buffer_type()) {
                EXPECT_EQ(ggml_backend_buffer_get_type(n->buffer), bufts[node_ids[size_t(i)]]) << n->name;
            }
        }
    };
    check_against_reference(transformer(4), opt);
    EXPECT_GT(ggml_gallocr_get_buffer_size(galloc.get(), 0), 0u);
    EXPECT_GT(ggml_gallocr_get_buffer_size(galloc.get(), 1), 0u);
    EXPECT_EQ(a.n_allocs, 1);
    EXPECT_EQ(b.n_allocs, 1);

    // Another structure cannot be planned without the ids.
    Contexts c;
    Built    other = build_inplace_chain(c.w, c.g);
    BufferPtr wb(ggml_backend_alloc_ctx_tensors(c.w, cpu_backend()));
    EXPECT_FALSE(ggml_gallocr_alloc_graph(galloc.get(), other.graph));
}

TEST(Gallocr, SameBufferTypeTwiceSharesOneBuffer) {
    ggml_backend_buffer_type_t bufts[2] = {ggml_backend_cpu_buffer_type(), ggml_backend_cpu_buffer_type()};
    GallocrPtr                 galloc(ggml_gallocr_new_n(bufts, 2));
    Contexts                   c;
    Built                      built = build_views(c.w, c.g);
    BufferPtr                  wb(ggml_backend_alloc_ctx_tensors(c.w, cpu_backend()));
    std::vector<int>           node_ids(size_t(ggml_graph_n_nodes(built.graph)));
    for (size_t i = 0; i < node_ids.size(); ++i) node_ids[i] = int(i % 2);
    size_t sizes[2] = {7, 7};
    ggml_gallocr_reserve_n_size(galloc.get(), built.graph, node_ids.data(), nullptr, sizes);
    EXPECT_GT(sizes[0], 0u);
    EXPECT_EQ(sizes[1], 0u);
    EXPECT_EQ(ggml_gallocr_get_buffer_size(galloc.get(), 0), 0u) << "reserve_n_size allocates nothing";
    ASSERT_TRUE(ggml_gallocr_reserve_n(galloc.get(), built.graph, node_ids.data(), nullptr));
    EXPECT_EQ(ggml_gallocr_get_buffer_size(galloc.get(), 0), sizes[0]);
    EXPECT_EQ(ggml_gallocr_get_buffer_size(galloc.get(), 1), 0u);
}

TEST(Gallocr, ReserveSizeAllocatesNothing) {
    TestBufferType buft("measure", 64);
    GallocrPtr     galloc(ggml_gallocr_new(&buft));
    Contexts       c;
    Built          built = build_transformer(c.w, c.g, 6);
    BufferPtr      wb(ggml_backend_alloc_ctx_tensors(c.w, cpu_backend()));
    size_t         size = 0;
    ggml_gallocr_reserve_n_size(galloc.get(), built.graph, nullptr, nullptr, &size);
    EXPECT_GT(size, 0u);
    EXPECT_EQ(buft.n_allocs, 0);
    const loom::GallocrPlanStats st = loom::gallocr_last_plan_stats(galloc.get(), 0);
    EXPECT_EQ(st.planned_bytes, size);
    EXPECT_GE(st.planned_bytes, st.lower_bound);
    ASSERT_TRUE(ggml_gallocr_reserve(galloc.get(), built.graph));
    EXPECT_EQ(ggml_gallocr_get_buffer_size(galloc.get(), 0), size);
    EXPECT_EQ(buft.n_allocs, 1);
}

TEST(Gallocr, SpreadsOverChunksAtTheMaxBufferSize) {
    TestBufferType buft("small", 64, 2048);
    GallocrPtr     galloc(ggml_gallocr_new(&buft));
    PlanOptions    opt;
    opt.galloc      = galloc.get();
    opt.after_alloc = [&](const Built & b) {
        std::set<ggml_backend_buffer_t> bufs;
        for (int i = 0; i < ggml_graph_n_nodes(b.graph); ++i) {
            ggml_tensor * n = ggml_graph_node(b.graph, i);
            if (n->view_src == nullptr && n->buffer != nullptr && ggml_backend_buffer_get_type(n->buffer) == &buft) {
                bufs.insert(n->buffer);
                EXPECT_LE(ggml_backend_buffer_get_size(n->buffer), 2048u);
            }
        }
        EXPECT_GT(bufs.size(), 1u);
    };
    check_against_reference(transformer(4), opt);
}

TEST(Gallocr, AllocationFailureReturnsFalse) {
    TestBufferType buft("broken", 64);
    buft.fail = true;
    GallocrPtr galloc(ggml_gallocr_new(&buft));
    Contexts   c;
    Built      built = build_inplace_chain(c.w, c.g);
    BufferPtr  wb(ggml_backend_alloc_ctx_tensors(c.w, cpu_backend()));
    LogCapture log;
    EXPECT_FALSE(ggml_gallocr_reserve(galloc.get(), built.graph));
    EXPECT_FALSE(ggml_gallocr_alloc_graph(galloc.get(), built.graph));
    EXPECT_TRUE(log.contains("failed to allocate"));
    EXPECT_EQ(ggml_graph_node(built.graph, -1)->data, nullptr);
    buft.fail = false;
    EXPECT_TRUE(ggml_gallocr_alloc_graph(galloc.get(), built.graph));
}

TEST(GallocrDeathTest, BufferIdOutOfRange) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    Contexts         c;
    Built            built = build_inplace_chain(c.w, c.g);
    std::vector<int> ids(size_t(ggml_graph_n_nodes(built.graph)), 3);
    EXPECT_DEATH(
        {
            ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
            ggml_gallocr_reserve_n(galloc, built.graph, ids.data(), nullptr);
        },
        "ggml_gallocr_reserve_n: node 0 .* has buffer id 3");
    EXPECT_DEATH(ggml_gallocr_alloc_graph(nullptr, built.graph), "ggml_gallocr_alloc_graph");
}

// ---- whole-context allocation ------------------------------------------------

TEST(AllocCtxTensors, SplitsAtTheMaxBufferSize) {
    TestBufferType buft("split", 64, 1024);
    Contexts       c;
    std::vector<ggml_tensor *> ts;
    for (int i = 0; i < 10; ++i) {
        ts.push_back(ggml_new_tensor_1d(c.g, GGML_TYPE_F32, 100)); // 400 bytes, 448 aligned
    }
    ggml_tensor * view = ggml_view_1d(c.g, ts[7], 10, 40);
    EXPECT_EQ(ggml_backend_alloc_ctx_tensors_from_buft_size(c.g, &buft), 5u * 2 * 448);
    BufferPtr buf(ggml_backend_alloc_ctx_tensors_from_buft(c.g, &buft));
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(ggml_backend_buffer_is_multi_buffer(buf.get()));
    EXPECT_EQ(ggml_backend_buffer_get_size(buf.get()), 5u * 2 * 448);
    EXPECT_EQ(buft.n_allocs, 5);
    for (size_t i = 0; i < ts.size(); ++i) {
        ASSERT_NE(ts[i]->data, nullptr);
        EXPECT_LE(ggml_backend_buffer_get_size(ts[i]->buffer), 1024u);
        std::vector<float> v(100, float(i));
        ggml_backend_tensor_set(ts[i], v.data(), 0, 400);
    }
    EXPECT_EQ(view->data, static_cast<char *>(ts[7]->data) + 40);
    for (size_t i = 0; i < ts.size(); ++i) {
        std::vector<float> v(100);
        ggml_backend_tensor_get(ts[i], v.data(), 0, 400);
        EXPECT_EQ(v[99], float(i));
    }
}

TEST(AllocCtxTensors, OversizedTensorGetsItsOwnBuffer) {
    TestBufferType buft("tiny", 64, 256);
    Contexts       c;
    ggml_tensor *  a = ggml_new_tensor_1d(c.g, GGML_TYPE_F32, 16);
    ggml_tensor *  b = ggml_new_tensor_1d(c.g, GGML_TYPE_F32, 200);
    LogCapture     log;
    BufferPtr      buf(ggml_backend_alloc_ctx_tensors_from_buft(c.g, &buft));
    ASSERT_NE(buf, nullptr);
    EXPECT_NE(a->buffer, b->buffer);
    EXPECT_EQ(ggml_backend_buffer_get_size(b->buffer), 832u); // 800 bytes rounded to the alignment
    EXPECT_TRUE(log.contains("trying anyway"));
}

TEST(AllocCtxTensors, NothingToAllocateAndFailure) {
    TestBufferType buft("ctx", 64, 1024);
    Contexts       c;
    EXPECT_EQ(ggml_backend_alloc_ctx_tensors_from_buft(c.g, &buft), nullptr);
    EXPECT_EQ(buft.n_allocs, 0);

    std::vector<ggml_tensor *> ts;
    for (int i = 0; i < 4; ++i) {
        ts.push_back(ggml_new_tensor_1d(c.g, GGML_TYPE_F32, 100));
    }
    buft.fail = true;
    LogCapture log;
    EXPECT_EQ(ggml_backend_alloc_ctx_tensors_from_buft(c.g, &buft), nullptr);
    EXPECT_TRUE(log.contains("failed to allocate"));
    for (ggml_tensor * t : ts) {
        EXPECT_EQ(t->data, nullptr);
        EXPECT_EQ(t->buffer, nullptr);
    }
}
