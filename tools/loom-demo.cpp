// loom-demo: builds one transformer block (pre-norm attention with rotary
// embeddings and grouped-query heads, then a SwiGLU feed-forward) with the
// ggml API, runs it on the CPU backend and prints results and timing.
//
//   loom-demo [-t threads] [-n tokens] [-d model_dim] [-r repeats] [--seed N]

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace {

struct Options {
    int      n_threads = 2;
    int      n_tokens  = 32;
    int      n_embd    = 256;
    int      n_head    = 8;
    int      n_head_kv = 4;
    int      n_ff      = 688;
    int      repeats   = 10;
    unsigned seed      = 42;
};

void usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s [-t threads] [-n tokens] [-d model_dim] [-r repeats] [--seed N]\n"
                 "Builds one transformer block with the ggml API, computes it on the CPU backend\n"
                 "and prints the output statistics and the time per evaluation.\n",
                 argv0);
}

bool parse(int argc, char ** argv, Options & o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto              next = [&](int & v) {
            if (i + 1 >= argc) return false;
            char * end = nullptr;
            const long x = std::strtol(argv[++i], &end, 10);
            if (*end != '\0' || x <= 0 || x > 1 << 20) return false;
            v = int(x);
            return true;
        };
        int seed = 0;
        if ((a == "-t" && next(o.n_threads)) || (a == "-n" && next(o.n_tokens)) || (a == "-d" && next(o.n_embd)) ||
            (a == "-r" && next(o.repeats))) {
            continue;
        }
        if (a == "--seed" && next(seed)) {
            o.seed = unsigned(seed);
            continue;
        }
        return false;
    }
    return o.n_embd % (2 * o.n_head) == 0;
}

struct Weights {
    ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
};

} // namespace

int main(int argc, char ** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        usage(argv[0]);
        return 2;
    }
    const int head_dim = o.n_embd / o.n_head;
    const int kv_dim   = head_dim * o.n_head_kv;

    ggml_backend_ptr backend(ggml_backend_cpu_init());
    if (!backend) {
        std::fprintf(stderr, "failed to initialise the CPU backend\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(backend.get(), o.n_threads);
    ggml_backend_dev_t dev = ggml_backend_get_device(backend.get());
    std::fprintf(stderr, "device: %s (%s), %d threads\n", ggml_backend_dev_name(dev),
                 ggml_backend_dev_description(dev), o.n_threads);

    // Weights and inputs in one context, allocated in one backend buffer.
    ggml_init_params wp = {64 * ggml_tensor_overhead(), nullptr, true};
    ggml_context_ptr wctx(ggml_init(wp));
    Weights          w{};
    w.attn_norm = ggml_new_tensor_1d(wctx.get(), GGML_TYPE_F32, o.n_embd);
    w.wq        = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F16, o.n_embd, o.n_embd);
    w.wk        = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F16, o.n_embd, kv_dim);
    w.wv        = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F16, o.n_embd, kv_dim);
    w.wo        = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_Q8_0, o.n_embd, o.n_embd);
    w.ffn_norm  = ggml_new_tensor_1d(wctx.get(), GGML_TYPE_F32, o.n_embd);
    w.w_gate    = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_Q4_0, o.n_embd, o.n_ff);
    w.w_up      = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_Q4_0, o.n_embd, o.n_ff);
    w.w_down    = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, o.n_ff, o.n_embd);
    ggml_tensor * x   = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, o.n_embd, o.n_tokens);
    ggml_tensor * pos = ggml_new_tensor_1d(wctx.get(), GGML_TYPE_I32, o.n_tokens);
    ggml_tensor * kq_mask = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, o.n_tokens, o.n_tokens);

    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors(wctx.get(), backend.get()));
    if (!wbuf) {
        std::fprintf(stderr, "failed to allocate the weights\n");
        return 1;
    }
    ggml_backend_buffer_set_usage(wbuf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    std::mt19937                          rng(o.seed);
    std::normal_distribution<float>       normal(0.0f, 1.0f);
    auto fill = [&](ggml_tensor * t, float scale) {
        const int64_t      n = ggml_nelements(t);
        std::vector<float> v(static_cast<size_t>(n));
        for (float & f : v) f = normal(rng) * scale;
        if (t->type == GGML_TYPE_F32) {
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
            return;
        }
        std::vector<uint8_t> q(ggml_nbytes(t));
        ggml_quantize_chunk(t->type, v.data(), q.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
        ggml_backend_tensor_set(t, q.data(), 0, q.size());
    };
    std::vector<float> ones(size_t(o.n_embd), 1.0f);
    ggml_backend_tensor_set(w.attn_norm, ones.data(), 0, ggml_nbytes(w.attn_norm));
    ggml_backend_tensor_set(w.ffn_norm, ones.data(), 0, ggml_nbytes(w.ffn_norm));
    for (ggml_tensor * t : {w.wq, w.wk, w.wv, w.wo, w.w_gate, w.w_up}) fill(t, 1.0f / std::sqrt(float(o.n_embd)));
    fill(w.w_down, 1.0f / std::sqrt(float(o.n_ff)));
    fill(x, 1.0f);
    std::vector<int32_t> positions(size_t(o.n_tokens));
    for (int i = 0; i < o.n_tokens; ++i) positions[size_t(i)] = i;
    ggml_backend_tensor_set(pos, positions.data(), 0, ggml_nbytes(pos));
    std::vector<float> mask(size_t(o.n_tokens) * size_t(o.n_tokens));
    for (int q = 0; q < o.n_tokens; ++q)
        for (int k = 0; k < o.n_tokens; ++k) mask[size_t(q * o.n_tokens + k)] = k <= q ? 0.0f : -INFINITY;
    ggml_backend_tensor_set(kq_mask, mask.data(), 0, ggml_nbytes(kq_mask));

    // The graph: its tensors get memory from the compute context below.
    const size_t     graph_mem = 256 * ggml_tensor_overhead() + ggml_graph_overhead();
    ggml_init_params gp        = {graph_mem, nullptr, true};
    ggml_context_ptr gctx(ggml_init(gp));
    ggml_context *   c = gctx.get();

    const float   eps = 1e-5f;
    ggml_tensor * cur = ggml_mul(c, ggml_rms_norm(c, x, eps), w.attn_norm);
    ggml_tensor * q   = ggml_reshape_3d(c, ggml_mul_mat(c, w.wq, cur), head_dim, o.n_head, o.n_tokens);
    ggml_tensor * k   = ggml_reshape_3d(c, ggml_mul_mat(c, w.wk, cur), head_dim, o.n_head_kv, o.n_tokens);
    ggml_tensor * v   = ggml_reshape_3d(c, ggml_mul_mat(c, w.wv, cur), head_dim, o.n_head_kv, o.n_tokens);
    q = ggml_rope_ext(c, q, pos, nullptr, head_dim, GGML_ROPE_TYPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    k = ggml_rope_ext(c, k, pos, nullptr, head_dim, GGML_ROPE_TYPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    // [head_dim, n_tokens, n_head] for the per-head products.
    ggml_tensor * qp  = ggml_permute(c, q, 0, 2, 1, 3);
    ggml_tensor * kp  = ggml_cont(c, ggml_permute(c, k, 0, 2, 1, 3));
    ggml_tensor * kq  = ggml_mul_mat(c, kp, qp); // [n_kv, n_tokens, n_head], heads broadcast over KV heads
    kq                = ggml_soft_max_ext(c, kq, kq_mask, 1.0f / std::sqrt(float(head_dim)), 0.0f);
    ggml_tensor * vt  = ggml_cont(c, ggml_permute(c, v, 1, 2, 0, 3)); // [n_tokens, head_dim, n_head_kv]
    ggml_tensor * kqv = ggml_mul_mat(c, vt, kq);                       // [head_dim, n_tokens, n_head]
    ggml_tensor * att = ggml_cont_2d(c, ggml_permute(c, kqv, 0, 2, 1, 3), o.n_embd, o.n_tokens);
    ggml_tensor * h   = ggml_add(c, x, ggml_mul_mat(c, w.wo, att));
    cur               = ggml_mul(c, ggml_rms_norm(c, h, eps), w.ffn_norm);
    ggml_tensor * ffn = ggml_mul(c, ggml_silu(c, ggml_mul_mat(c, w.w_gate, cur)), ggml_mul_mat(c, w.w_up, cur));
    ggml_tensor * out = ggml_add(c, h, ggml_mul_mat(c, w.w_down, ffn));
    ggml_set_name(out, "out");
    ggml_set_output(out);

    ggml_cgraph * gf = ggml_new_graph(c);
    ggml_build_forward_expand(gf, out);

    ggml_backend_buffer_ptr cbuf(ggml_backend_alloc_ctx_tensors(c, backend.get()));
    if (!cbuf) {
        std::fprintf(stderr, "failed to allocate the compute buffer\n");
        return 1;
    }

    ggml_status st = ggml_backend_graph_compute(backend.get(), gf); // warm-up
    const int64_t t0 = ggml_time_us();
    for (int r = 0; r < o.repeats && st == GGML_STATUS_SUCCESS; ++r) {
        st = ggml_backend_graph_compute(backend.get(), gf);
    }
    const int64_t t1 = ggml_time_us();
    if (st != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "compute failed: %s\n", ggml_status_to_string(st));
        return 1;
    }

    std::vector<float> y(size_t(ggml_nelements(out)));
    ggml_backend_tensor_get(out, y.data(), 0, ggml_nbytes(out));
    double sum = 0, sum2 = 0;
    for (float f : y) {
        sum += f;
        sum2 += double(f) * f;
    }
    const double mean = sum / double(y.size());
    const double ms   = double(t1 - t0) / 1000.0 / o.repeats;
    double flops = 2.0 * o.n_tokens * (double(o.n_embd) * (o.n_embd * 2 + kv_dim * 2) + 3.0 * o.n_embd * o.n_ff) +
                   4.0 * o.n_head * double(o.n_tokens) * o.n_tokens * head_dim;

    std::printf("transformer block: %d tokens, dim %d, %d heads (%d kv), ffn %d, %d graph nodes\n", o.n_tokens,
                o.n_embd, o.n_head, o.n_head_kv, o.n_ff, ggml_graph_n_nodes(gf));
    std::printf("output[0..4]: %.6f %.6f %.6f %.6f\n", y[0], y[1], y[2], y[3]);
    std::printf("output mean %.6f, rms %.6f\n", mean, std::sqrt(sum2 / double(y.size())));
    std::printf("time: %.3f ms per evaluation (%d runs), %.2f GFLOP/s\n", ms, o.repeats, flops / (ms * 1e6));
    return 0;
}
