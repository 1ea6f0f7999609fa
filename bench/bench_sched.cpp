// Scheduler overhead per graph: placement, splitting and memory planning of
// transformer graphs rebuilt every step (as a model runner does per token),
// with plan reuse (the default) and without (LOOM_SCHED_REUSE=0), measured
// in the same run. Prints microseconds per graph and per node.
//
//   bench_sched [layers] [repeats] [replan|reuse]
//
// With a mode, only that mode runs at the given depth (for instruction
// counts under callgrind, which are repeatable on a shared machine).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

namespace {

struct Model {
    ggml_context_ptr           ctx;
    ggml_backend_buffer_ptr    buf;
    std::vector<ggml_tensor *> wq, wk, wv, wo, w1, w2, w3, n1, n2;
};

constexpr int d = 256, f = 688, heads = 8, hd = d / heads;

Model make_model(ggml_backend_t cpu, int layers) {
    Model            m;
    ggml_init_params p = {size_t(layers) * 10 * ggml_tensor_overhead(), nullptr, true};
    m.ctx.reset(ggml_init(p));
    for (int l = 0; l < layers; ++l) {
        m.wq.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_F16, d, d));
        m.wk.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_F16, d, d));
        m.wv.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_F16, d, d));
        m.wo.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_F16, d, d));
        m.w1.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_Q8_0, d, f));
        m.w3.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_Q8_0, d, f));
        m.w2.push_back(ggml_new_tensor_2d(m.ctx.get(), GGML_TYPE_F16, f, d));
        m.n1.push_back(ggml_new_tensor_1d(m.ctx.get(), GGML_TYPE_F32, d));
        m.n2.push_back(ggml_new_tensor_1d(m.ctx.get(), GGML_TYPE_F32, d));
    }
    m.buf.reset(ggml_backend_alloc_ctx_tensors(m.ctx.get(), cpu));
    ggml_backend_buffer_set_usage(m.buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_buffer_clear(m.buf.get(), 0);
    return m;
}

// One decoding step: a graph of every layer for one token.
ggml_cgraph * build(ggml_context * c, const Model & m, int layers) {
    ggml_tensor * x   = ggml_new_tensor_2d(c, GGML_TYPE_F32, d, 1);
    ggml_tensor * pos = ggml_new_tensor_1d(c, GGML_TYPE_I32, 1);
    ggml_set_input(x);
    ggml_set_input(pos);
    for (int l = 0; l < layers; ++l) {
        ggml_tensor * h = ggml_mul(c, ggml_rms_norm(c, x, 1e-5f), m.n1[size_t(l)]);
        ggml_tensor * q = ggml_rope_ext(c, ggml_reshape_3d(c, ggml_mul_mat(c, m.wq[size_t(l)], h), hd, heads, 1), pos,
                                        nullptr, hd, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        ggml_tensor * k = ggml_rope_ext(c, ggml_reshape_3d(c, ggml_mul_mat(c, m.wk[size_t(l)], h), hd, heads, 1), pos,
                                        nullptr, hd, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        ggml_tensor * v = ggml_reshape_3d(c, ggml_mul_mat(c, m.wv[size_t(l)], h), hd, heads, 1);
        ggml_tensor * a = ggml_flash_attn_ext(c, ggml_permute(c, q, 0, 2, 1, 3), ggml_permute(c, k, 0, 2, 1, 3),
                                              ggml_permute(c, v, 0, 2, 1, 3), nullptr, 0.125f, 0.0f, 0.0f);
        x = ggml_add(c, x, ggml_mul_mat(c, m.wo[size_t(l)], ggml_reshape_2d(c, a, d, 1)));
        ggml_tensor * g = ggml_mul(c, ggml_rms_norm(c, x, 1e-5f), m.n2[size_t(l)]);
        ggml_tensor * u = ggml_mul(c, ggml_silu(c, ggml_mul_mat(c, m.w1[size_t(l)], g)), ggml_mul_mat(c, m.w3[size_t(l)], g));
        x               = ggml_add(c, x, ggml_mul_mat(c, m.w2[size_t(l)], u));
    }
    ggml_set_output(x);
    ggml_cgraph * gf = ggml_new_graph_custom(c, size_t(layers) * 32 + 16, false);
    ggml_build_forward_expand(gf, x);
    return gf;
}

double run(ggml_backend_t cpu, const Model & m, int layers, int repeats, bool reuse, int * n_nodes) {
    setenv("LOOM_SCHED_REUSE", reuse ? "1" : "0", 1);
    ggml_backend_t       backends[1] = {cpu};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, size_t(layers) * 32 + 16, false, true);
    const size_t         mem = size_t(layers) * 40 * ggml_tensor_overhead() + ggml_graph_overhead_custom(size_t(layers) * 32 + 16, false);
    double               total_us = 0;
    for (int r = 0; r < repeats + 1; ++r) {
        ggml_init_params p = {mem, nullptr, true};
        ggml_context_ptr c(ggml_init(p));
        ggml_cgraph *    gf = build(c.get(), m, layers);
        *n_nodes            = ggml_graph_n_nodes(gf);
        const auto t0       = std::chrono::steady_clock::now();
        ggml_backend_sched_reset(s);
        if (!ggml_backend_sched_alloc_graph(s, gf)) {
            std::fprintf(stderr, "alloc_graph failed\n");
            std::exit(1);
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (r > 0) total_us += std::chrono::duration<double, std::micro>(t1 - t0).count(); // first one warms up
    }
    ggml_backend_sched_free(s);
    return total_us / repeats;
}

} // namespace

int main(int argc, char ** argv) {
    const int        max_layers = argc > 1 ? std::atoi(argv[1]) : 32;
    const int        repeats    = argc > 2 ? std::atoi(argv[2]) : 50;
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    if (argc > 3) {
        const bool reuse = std::string(argv[3]) == "reuse";
        Model      m     = make_model(cpu.get(), max_layers);
        int        n     = 0;
        const double us  = run(cpu.get(), m, max_layers, repeats, reuse, &n);
        std::printf("%s: %d layers, %d nodes, %.1f us/graph, %.3f us/node\n", reuse ? "reuse" : "replan", max_layers, n,
                    us, us / n);
        return 0;
    }
    std::printf("%8s %8s %16s %16s %14s %14s %8s\n", "layers", "nodes", "replan us/graph", "reuse us/graph",
                "replan us/node", "reuse us/node", "ratio");
    for (int layers = 4; layers <= max_layers; layers *= 2) {
        Model        m = make_model(cpu.get(), layers);
        int          n = 0;
        const double a = run(cpu.get(), m, layers, repeats, false, &n);
        const double b = run(cpu.get(), m, layers, repeats, true, &n);
        std::printf("%8d %8d %16.1f %16.1f %14.3f %14.3f %7.2fx\n", layers, n, a, b, a / n, b / n, a / b);
    }
    return 0;
}
