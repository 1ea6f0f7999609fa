// Matrix products on the CPU backend and on the BLAS backend, measured in
// the same run on the same tensors (both read the CPU's buffers), at
// batch sizes from 1 to 512 columns. The point where BLAS becomes faster is
// the threshold of the BLAS device's supports_op (src/backends/blas/policy.h).
//
//   bench_blas [--quick] [--threads N] [--min-time SECONDS] [--only TEXT] [--batches N,N,...]
//
//   bench_blas --write-model OUT.gguf --from SRC.gguf [--type T] [--embd N] [--ff N] [--layers N]
//              [--heads N] [--heads-kv N]
//
// writes a Llama model with random weights of type T (f32, f16, bf16, q8_0,
// q4_0; default q8_0) and SRC's tokenizer, for timing loom-run's forward
// pass at sizes the bundled model does not have (its outputs are noise).
//
// --only keeps the cases whose label ("mul_mat q4_0 4096x4096", "kq f16 Nx128",
// "out_prod f32 1024x1024") contains TEXT.
//
// Shapes:
//   mul_mat  W [K, M] x X [K, N]         weights of type F32, F16, BF16, Q8_0, Q4_0
//   kq       K [128, N, 8] x Q [128, N, 32] attention scores of a prompt (F32, F16 K)
//   out_prod A [M, K] x B [N, K]         F32, as in a weight gradient
// Each line: best time of several runs on each backend, their ratio, the
// rate in GFLOP/s, and the largest difference between the two results
// relative to the largest element (a check that both computed the same).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-blas.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "gguf.h"

namespace {

struct Options {
    bool                 quick = false;
    std::string          only; // run the cases whose "product type MxK" label contains this
    std::vector<int64_t> batches;
    int    threads  = 0; // 0: every hardware thread
    double min_time = 0.25;
};

struct Case {
    std::string                                           family;
    ggml_type                                             type;
    int64_t                                               m, k; // per-matrix sizes (kq: k = head size)
    std::function<ggml_tensor *(ggml_context *, int64_t)> build;
    double                                                flops_per_n; // multiply by n (and n again for kq)
    bool                                                  square_in_n = false;
};

void fill(ggml_tensor * t, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t                         n = ggml_nelements(t);
    std::vector<float>                    v(static_cast<size_t>(n));
    for (float & x : v) x = u(rng);
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(bytes.data(), v.data(), bytes.size()); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), reinterpret_cast<ggml_bf16_t *>(bytes.data()), n); break;
        default: ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, ggml_nrows(t), t->ne[0], nullptr); break;
    }
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

// Best wall times of graph on the two backends. The backends take turns so
// that both see the same load on a shared machine; each turn runs the graph
// twice and times the second run, so that each backend is measured with its
// threads awake, as in a run of consecutive products (waking threads after
// the other backend's turn is a cost of switching, which the forward-pass
// measurement with loom-run includes). At least 3 and at most 50 turns each,
// until min_time seconds of timed runs.
void best_seconds(ggml_backend_t a, ggml_backend_t b, ggml_cgraph * g, double min_time, double * best_a,
                  double * best_b, std::vector<float> * out_a, const ggml_tensor * out) {
    using clock = std::chrono::steady_clock;
    auto timed  = [g](ggml_backend_t backend) {
        if (ggml_backend_graph_compute(backend, g) != GGML_STATUS_SUCCESS) {
            std::fprintf(stderr, "bench_blas: %s failed\n", ggml_backend_name(backend));
            std::exit(1);
        }
        const auto t0 = clock::now();
        ggml_backend_graph_compute(backend, g);
        return std::chrono::duration<double>(clock::now() - t0).count();
    };
    timed(a);
    out_a->resize(size_t(ggml_nelements(out)));
    ggml_backend_tensor_get(out, out_a->data(), 0, ggml_nbytes(out));
    timed(b);
    *best_a = *best_b = 1e30;
    double total      = 0;
    for (int runs = 0; runs < 3 || (total < min_time && runs < 50); ++runs) {
        const double ta = timed(a);
        const double tb = timed(b);
        *best_a         = std::min(*best_a, ta);
        *best_b         = std::min(*best_b, tb);
        total += ta + tb;
    }
}

std::vector<float> read(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

struct Row {
    int64_t n;
    double  cpu_s, blas_s, diff;
};

Row measure(const Case & c, int64_t n, ggml_backend_t cpu, ggml_backend_t blas, const Options & o) {
    ggml_init_params p = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context_ptr ctx(ggml_init(p));
    ggml_tensor *    out = c.build(ctx.get(), n);
    ggml_cgraph *    g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, out);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_cpu_buffer_type()));
    if (!buf) {
        std::fprintf(stderr, "bench_blas: out of memory\n");
        std::exit(1);
    }
    std::mt19937 rng(unsigned(n * 7919 + c.m));
    for (int i = 0; i < GGML_MAX_SRC && out->src[i] != nullptr; ++i) fill(out->src[i], rng);

    Row                r{n, 0, 0, 0};
    std::vector<float> ref;
    best_seconds(cpu, blas, g, o.min_time, &r.cpu_s, &r.blas_s, &ref, out);
    const std::vector<float> got = read(out); // the last run was BLAS's
    double                   scale = 0, diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        scale = std::max(scale, double(std::fabs(ref[i])));
        diff  = std::max(diff, double(std::fabs(ref[i] - got[i])));
    }
    r.diff = scale > 0 ? diff / scale : diff;
    return r;
}

std::vector<Case> cases(const Options & o) {
    std::vector<Case> out;
    const ggml_type   weight_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    std::vector<std::pair<int64_t, int64_t>> sizes = {{4096, 4096}, {1024, 1024}, {256, 256}, {64, 64}};
    if (o.quick) sizes = {{1024, 1024}, {64, 64}};
    for (const auto & [m, k] : sizes) {
        for (ggml_type t : weight_types) {
            out.push_back({"mul_mat", t, m, k,
                           [t, m = m, k = k](ggml_context * c, int64_t n) {
                               return ggml_mul_mat(c, ggml_new_tensor_2d(c, t, k, m),
                                                   ggml_new_tensor_2d(c, GGML_TYPE_F32, k, n));
                           },
                           2.0 * double(m) * double(k)});
        }
    }
    // Attention scores of an n-token prompt: 32 query heads over 8 key heads of 128.
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        out.push_back({"kq", t, 0, 128,
                       [t](ggml_context * c, int64_t n) {
                           return ggml_mul_mat(c, ggml_new_tensor_3d(c, t, 128, n, 8),
                                               ggml_new_tensor_3d(c, GGML_TYPE_F32, 128, n, 32));
                       },
                       2.0 * 128 * 32, true});
    }
    for (const auto & [m, k] : sizes) {
        if (m > 1024) continue;
        out.push_back({"out_prod", GGML_TYPE_F32, m, k,
                       [m = m, k = k](ggml_context * c, int64_t n) {
                           return ggml_out_prod(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, m, k),
                                                ggml_new_tensor_2d(c, GGML_TYPE_F32, n, k));
                       },
                       2.0 * double(m) * double(k)});
    }
    return out;
}

// ---- a random-weight model for loom-run -------------------------------------

struct ModelShape {
    ggml_type type      = GGML_TYPE_Q8_0;
    int64_t   embd      = 1024;
    int64_t   ff        = 2816;
    int64_t   layers    = 4;
    int64_t   heads     = 16;
    int64_t   heads_kv  = 4;
};

// Values of a layer initialised as networks are before training: normal with
// a spread of 1/sqrt(fan-in), so activations stay of order one.
void fill_normal(ggml_tensor * t, std::mt19937 & rng, float stddev) {
    std::normal_distribution<float> dist(0.0f, stddev);
    const int64_t                   n = ggml_nelements(t);
    std::vector<float>              v(static_cast<size_t>(n));
    for (float & x : v) x = dist(rng);
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(t->data, v.data(), ggml_nbytes(t)); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), static_cast<ggml_fp16_t *>(t->data), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), static_cast<ggml_bf16_t *>(t->data), n); break;
        default: ggml_quantize_chunk(t->type, v.data(), t->data, 0, ggml_nrows(t), t->ne[0], nullptr); break;
    }
}

int write_model(const char * out_path, const char * src_path, const ModelShape & m) {
    ggml_context *   src_meta = nullptr;
    gguf_init_params gp       = {true, &src_meta};
    gguf_context *   src      = gguf_init_from_file(src_path, gp);
    if (src == nullptr) {
        std::fprintf(stderr, "bench_blas: cannot read %s\n", src_path);
        return 1;
    }
    const int64_t embd_id = gguf_find_tensor(src, "token_embd.weight");
    if (embd_id < 0 || m.embd % m.heads != 0 || m.heads % m.heads_kv != 0) {
        std::fprintf(stderr, "bench_blas: %s has no token_embd.weight, or the head counts do not divide\n", src_path);
        gguf_free(src);
        ggml_free(src_meta);
        return 1;
    }
    const int64_t n_vocab  = gguf_get_tensor_ne(src, embd_id)[1];
    const int64_t head_dim = m.embd / m.heads;

    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, src); // tokenizer and everything else of the source
    gguf_free(src);
    ggml_free(src_meta);
    for (const char * key : {"llama.attention.key_length", "llama.attention.value_length"}) {
        gguf_remove_key(out, key);
    }
    gguf_set_val_str(out, "general.name", "bench_blas random weights");
    gguf_set_val_u32(out, "llama.context_length", 4096);
    gguf_set_val_u32(out, "llama.embedding_length", uint32_t(m.embd));
    gguf_set_val_u32(out, "llama.feed_forward_length", uint32_t(m.ff));
    gguf_set_val_u32(out, "llama.block_count", uint32_t(m.layers));
    gguf_set_val_u32(out, "llama.attention.head_count", uint32_t(m.heads));
    gguf_set_val_u32(out, "llama.attention.head_count_kv", uint32_t(m.heads_kv));
    gguf_set_val_u32(out, "llama.rope.dimension_count", uint32_t(head_dim));

    // Every tensor's data in one arena.
    const int64_t kv    = head_dim * m.heads_kv;
    const size_t  per_w = ggml_row_size(m.type, m.embd);
    const size_t  bytes = size_t(m.layers) * (size_t(2 * m.embd + 2 * kv + 2 * m.ff) * per_w +
                                              ggml_row_size(m.type, m.ff) * size_t(m.embd) + 2 * 4 * size_t(m.embd)) +
                         size_t(n_vocab) * (per_w + 4 * size_t(m.embd)) + 4 * size_t(m.embd) +
                         ggml_tensor_overhead() * size_t(16 * m.layers + 16) + (size_t(1) << 20);
    ggml_init_params ip  = {bytes, nullptr, false};
    ggml_context *   ctx = ggml_init(ip);
    if (ctx == nullptr) {
        std::fprintf(stderr, "bench_blas: out of memory for %zu bytes of weights\n", bytes);
        gguf_free(out);
        return 1;
    }
    std::mt19937 rng(1234);
    auto add = [&](const std::string & name, ggml_type type, int64_t ne0, int64_t ne1) {
        ggml_tensor * t = ne1 == 0 ? ggml_new_tensor_1d(ctx, type, ne0) : ggml_new_tensor_2d(ctx, type, ne0, ne1);
        ggml_set_name(t, name.c_str());
        if (ne1 == 0) {
            std::vector<float> ones(static_cast<size_t>(ne0), 1.0f); // norm weights
            std::memcpy(t->data, ones.data(), ggml_nbytes(t));
        } else {
            fill_normal(t, rng, 1.0f / std::sqrt(float(ne0)));
        }
        gguf_add_tensor(out, t);
    };
    add("token_embd.weight", GGML_TYPE_F32, m.embd, n_vocab);
    for (int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        add(p + "attn_norm.weight", GGML_TYPE_F32, m.embd, 0);
        add(p + "attn_q.weight", m.type, m.embd, m.embd);
        add(p + "attn_k.weight", m.type, m.embd, kv);
        add(p + "attn_v.weight", m.type, m.embd, kv);
        add(p + "attn_output.weight", m.type, m.embd, m.embd);
        add(p + "ffn_norm.weight", GGML_TYPE_F32, m.embd, 0);
        add(p + "ffn_gate.weight", m.type, m.embd, m.ff);
        add(p + "ffn_up.weight", m.type, m.embd, m.ff);
        add(p + "ffn_down.weight", m.type, m.ff, m.embd);
    }
    add("output_norm.weight", GGML_TYPE_F32, m.embd, 0);
    add("output.weight", m.type, m.embd, n_vocab);

    const bool ok = gguf_write_to_file(out, out_path, false);
    gguf_free(out);
    ggml_free(ctx);
    if (!ok) {
        std::fprintf(stderr, "bench_blas: cannot write %s\n", out_path);
        return 1;
    }
    std::printf("wrote %s: %lld layers, embd %lld, ff %lld, %lld/%lld heads, vocab %lld, %s weights\n", out_path,
                (long long) m.layers, (long long) m.embd, (long long) m.ff, (long long) m.heads,
                (long long) m.heads_kv, (long long) n_vocab, ggml_type_name(m.type));
    return 0;
}

} // namespace

int main(int argc, char ** argv) {
    Options     o;
    ModelShape  shape;
    const char * write_path = nullptr;
    const char * from_path  = nullptr;
    auto         int_arg    = [&](int & i) { return std::strtoll(argv[++i], nullptr, 10); };
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        if (std::strcmp(argv[i], "--write-model") == 0 && has_value) {
            write_path = argv[++i];
        } else if (std::strcmp(argv[i], "--from") == 0 && has_value) {
            from_path = argv[++i];
        } else if (std::strcmp(argv[i], "--type") == 0 && has_value) {
            const std::string name = argv[++i];
            shape.type             = GGML_TYPE_COUNT;
            for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
                if (name == ggml_type_name(t)) shape.type = t;
            }
            if (shape.type == GGML_TYPE_COUNT) {
                std::fprintf(stderr, "bench_blas: unknown --type %s\n", name.c_str());
                return 2;
            }
        } else if (std::strcmp(argv[i], "--embd") == 0 && has_value) {
            shape.embd = int_arg(i);
        } else if (std::strcmp(argv[i], "--ff") == 0 && has_value) {
            shape.ff = int_arg(i);
        } else if (std::strcmp(argv[i], "--layers") == 0 && has_value) {
            shape.layers = int_arg(i);
        } else if (std::strcmp(argv[i], "--heads") == 0 && has_value) {
            shape.heads = int_arg(i);
        } else if (std::strcmp(argv[i], "--heads-kv") == 0 && has_value) {
            shape.heads_kv = int_arg(i);
        } else if (std::strcmp(argv[i], "--quick") == 0) {
            o.quick = true;
        } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            o.threads = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
            o.min_time = std::atof(argv[++i]);
        } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            o.only = argv[++i];
        } else if (std::strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
            for (char * p = argv[++i]; *p != '\0';) {
                o.batches.push_back(std::strtoll(p, &p, 10));
                if (*p == ',') ++p;
                else if (*p != '\0') { std::fprintf(stderr, "bench_blas: bad --batches\n"); return 2; }
            }
        } else {
            std::fprintf(stderr,
                         "usage: %s [--quick] [--threads N] [--min-time SECONDS] [--only TEXT] [--batches N,N,...]\n"
                         "       %s --write-model OUT.gguf --from SRC.gguf [--type T] [--embd N] [--ff N] [--layers N]"
                         " [--heads N] [--heads-kv N]\n",
                         argv[0], argv[0]);
            return 2;
        }
    }
    if (write_path != nullptr || from_path != nullptr) {
        if (write_path == nullptr || from_path == nullptr || shape.embd <= 0 || shape.ff <= 0 || shape.layers <= 0 ||
            shape.heads <= 0 || shape.heads_kv <= 0) {
            std::fprintf(stderr, "bench_blas: --write-model needs --from and positive sizes\n");
            return 2;
        }
        return write_model(write_path, from_path, shape);
    }
    if (o.threads <= 0) {
        o.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    }

    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr blas(ggml_backend_blas_init());
    if (!cpu || !blas) {
        std::fprintf(stderr, "bench_blas: cannot create the backends\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(cpu.get(), o.threads);
    ggml_backend_blas_set_n_threads(blas.get(), o.threads);
    std::printf("threads: %d, BLAS device: %s\n\n", o.threads,
                ggml_backend_dev_description(ggml_backend_get_device(blas.get())));

    std::vector<int64_t> batches = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512};
    if (o.quick) batches = {1, 8, 32, 128};
    if (!o.batches.empty()) batches = o.batches;

    std::printf("| product | type | M | K | N | CPU ms | BLAS ms | CPU/BLAS | CPU GFLOP/s | BLAS GFLOP/s | diff |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<std::string> summary;
    for (const Case & c : cases(o)) {
        const std::string label = c.family + " " + ggml_type_name(c.type) + " " +
                                  (c.square_in_n ? std::string("N") : std::to_string(c.m)) + "x" + std::to_string(c.k);
        if (!o.only.empty() && label.find(o.only) == std::string::npos) continue;
        int64_t crossover = -1; // smallest n from which BLAS won at every larger n
        for (int64_t n : batches) {
            const Row    r     = measure(c, n, cpu.get(), blas.get(), o);
            const double flops = c.flops_per_n * double(n) * (c.square_in_n ? double(n) : 1.0);
            std::printf("| %s | %s | %lld | %lld | %lld | %.3f | %.3f | %.2f | %.1f | %.1f | %.1e |\n",
                        c.family.c_str(), ggml_type_name(c.type), (long long) (c.square_in_n ? n : c.m),
                        (long long) c.k, (long long) n, r.cpu_s * 1e3, r.blas_s * 1e3, r.cpu_s / r.blas_s,
                        flops / r.cpu_s * 1e-9, flops / r.blas_s * 1e-9, r.diff);
            std::fflush(stdout);
            if (r.blas_s < r.cpu_s) {
                if (crossover < 0) crossover = n;
            } else {
                crossover = -1;
            }
        }
        char line[160];
        std::snprintf(line, sizeof(line), "%s %s M=%s K=%lld: %s", c.family.c_str(), ggml_type_name(c.type),
                      c.square_in_n ? "N" : std::to_string(c.m).c_str(), (long long) c.k,
                      crossover < 0 ? "BLAS never faster through the largest N"
                                    : ("BLAS faster from N = " + std::to_string(crossover)).c_str());
        summary.emplace_back(line);
    }
    std::printf("\ncrossover (smallest N from which BLAS was faster at every larger N measured):\n");
    for (const std::string & s : summary) std::printf("  %s\n", s.c_str());
    return 0;
}
