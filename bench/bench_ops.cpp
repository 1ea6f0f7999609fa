// The op cases of ggml's `test-backend-ops perf` that loom implements
// (matrix products of a 7B-class FFN for the float, legacy, K-quant and
// 4-bit non-linear weight types, the
// softmax, broadcast add, copy and flash-attention cases), timed through the CPU backend the
// way that mode times them: the op's node repeated in one graph until the
// graph moves about 8 GiB (or computes 8 GFLOP), the graph computed for at
// least a second, microseconds per op. Printed in the same form as ggml's
// lines, so that the two outputs can be put side by side. Threads: half the
// hardware threads by default, as ggml's perf mode sets.
//
//   bench_ops [--threads N] [--only TEXT] [--min-time SECONDS]
//
// It uses ggml's public headers only, so the same file built against ggml
// times ggml's CPU backend on the cases that ggml's perf list lacks:
//   g++ -O2 -std=c++17 bench/bench_ops.cpp -I$GGML/include -L$LIBS -lggml -lggml-base -lggml-cpu

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
#include "ggml-cpp.h"
#include "ggml-cpu.h"

// Built against ggml's own headers too (to time ggml beside loom), where
// loom's macro is absent.
#ifndef LOOM_BACKEND_API_VERSION
#define LOOM_BACKEND_API_VERSION 0
#endif

namespace {

struct Case {
    std::string                                  label; // as ggml prints the case
    std::function<ggml_tensor *(ggml_context *)> build;
    bool                                         flops; // report GFLOPS (products) or GB/s
};

std::string shape(std::initializer_list<int64_t> ne) {
    std::string s = "[";
    for (int64_t v : ne) s += std::to_string(v) + ",";
    s.back() = ']';
    return s;
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (int bs : {1, 2, 3, 4, 5, 8, 512}) {
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,
                            GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                            GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS}) {
            out.push_back({std::string("MUL_MAT(type_a=") + ggml_type_name(t) + ",type_b=f32,m=4096,n=" +
                               std::to_string(bs) + ",k=14336)",
                           [t, bs](ggml_context * c) {
                               return ggml_mul_mat(c, ggml_new_tensor_2d(c, t, 14336, 4096),
                                                   ggml_new_tensor_2d(c, GGML_TYPE_F32, 14336, bs));
                           },
                           true});
        }
    }
    // The prompt products of a 1.1B-parameter llama (TinyLlama's shapes:
    // embd 2048, FFN 5632), as its Q4_K_M file types them.
    for (ggml_type t : {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
        for (const auto & mk : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}}) {
            out.push_back({std::string("MUL_MAT(type_a=") + ggml_type_name(t) + ",type_b=f32,m=" +
                               std::to_string(mk.first) + ",n=512,k=" + std::to_string(mk.second) + ")",
                           [t, mk](ggml_context * c) {
                               return ggml_mul_mat(c, ggml_new_tensor_2d(c, t, mk.second, mk.first),
                                                   ggml_new_tensor_2d(c, GGML_TYPE_F32, mk.second, 512));
                           },
                           true});
        }
    }
    const int64_t sm[][3] = {{4096, 4096, 5}, {12888, 256, 5}, {77, 4096, 5}, {1024, 1024, 10},
                             {77, 1024, 10},  {256, 256, 20},  {64, 64, 20},  {77, 64, 20}};
    for (const auto & s : sm) {
        out.push_back({"SOFT_MAX(type=f32,ne=" + shape({s[0], s[1], s[2], 1}) + ")",
                       [s](ggml_context * c) {
                           return ggml_soft_max_ext(c, ggml_new_tensor_3d(c, GGML_TYPE_F32, s[0], s[1], s[2]), nullptr,
                                                    1.0f, 0.0f);
                       },
                       false});
    }
    out.push_back({"ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1])",
                   [](ggml_context * c) {
                       return ggml_add(c, ggml_new_tensor_1d(c, GGML_TYPE_F32, 4096), ggml_new_tensor_1d(c, GGML_TYPE_F32, 4096));
                   },
                   false});
    out.push_back({"ADD(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1])",
                   [](ggml_context * c) {
                       ggml_tensor * a = ggml_new_tensor_2d(c, GGML_TYPE_F32, 4096, 512);
                       return ggml_add(c, a, ggml_new_tensor_1d(c, GGML_TYPE_F32, 4096));
                   },
                   false});
    out.push_back({"CPY(type_src=f32,type_dst=f16,ne=[512,3072,1,1])",
                   [](ggml_context * c) {
                       return ggml_cpy(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 512, 3072),
                                       ggml_new_tensor_2d(c, GGML_TYPE_F16, 512, 3072));
                   },
                   false});
    // The other copies of ggml's perf mode: a permuted F32 source, and F32
    // to and from Q4_0.
    struct Cpy {
        ggml_type src, dst;
        int64_t   ne0;
        bool      permute;
    };
    for (const Cpy & k : {Cpy{GGML_TYPE_F32, GGML_TYPE_F32, 8192, true}, Cpy{GGML_TYPE_F32, GGML_TYPE_F32, 3072, true},
                          Cpy{GGML_TYPE_F32, GGML_TYPE_Q4_0, 8192, false}, Cpy{GGML_TYPE_Q4_0, GGML_TYPE_F32, 8192, false}}) {
        out.push_back({std::string("CPY(type_src=") + ggml_type_name(k.src) + ",type_dst=" + ggml_type_name(k.dst) +
                           ",ne=" + shape({k.ne0, 512, 2, 1}) + (k.permute ? ",permute_src=[0,2,1,3])" : ")"),
                       [k](ggml_context * c) {
                           ggml_tensor * src = ggml_new_tensor_4d(c, k.src, k.ne0, 512, 2, 1);
                           if (k.permute) src = ggml_permute(c, src, 0, 2, 1, 3);
                           return ggml_cpy(c, src, ggml_new_tensor(c, k.dst, 4, src->ne));
                       },
                       false});
    }
    // Rotary embedding, the normal and NeoX modes of ggml's perf cases: with
    // and without frequency factors (ff), on a tensor or a view of a larger
    // one (v).
    struct Rope {
        ggml_type type;
        int64_t   ne0, ne1;
        int       n_dims, mode;
    };
    for (int v : {0, 1}) {
        for (int ff : {0, 1}) {
            for (const Rope & r : {Rope{GGML_TYPE_F32, 128, 32, 128, 0}, Rope{GGML_TYPE_F32, 128, 64, 128, 0},
                                   Rope{GGML_TYPE_F32, 80, 32, 20, 2}, Rope{GGML_TYPE_F32, 64, 8, 64, 2},
                                   Rope{GGML_TYPE_F16, 128, 32, 128, 0}, Rope{GGML_TYPE_F16, 128, 64, 128, 0}}) {
                if (r.type == GGML_TYPE_F16 && (v != 0 || ff != 0)) continue;
                out.push_back({std::string("ROPE(type=") + ggml_type_name(r.type) + ",ne_a=" +
                                   shape({r.ne0, r.ne1, 512, 1}) + ",n_dims=" + std::to_string(r.n_dims) +
                                   ",mode=" + std::to_string(r.mode) + ",ff=" + std::to_string(ff) +
                                   ",v=" + std::to_string(v) + ")",
                               [r, v, ff](ggml_context * c) {
                                   ggml_tensor * a;
                                   if (v != 0) {
                                       // As ggml's case: a view of a tensor 2 x 4 x 3 times larger.
                                       ggml_tensor * big = ggml_new_tensor_4d(c, r.type, 2 * r.ne0, 4 * r.ne1, 3 * 512, 1);
                                       a = ggml_view_4d(c, big, r.ne0, r.ne1, 512, 1, big->nb[1], big->nb[2], big->nb[3], 0);
                                   } else {
                                       a = ggml_new_tensor_4d(c, r.type, r.ne0, r.ne1, 512, 1);
                                   }
                                   ggml_tensor * pos  = ggml_new_tensor_1d(c, GGML_TYPE_I32, 512);
                                   ggml_tensor * freq = ff != 0 ? ggml_new_tensor_1d(c, GGML_TYPE_F32, r.n_dims / 2) : nullptr;
                                   return ggml_rope_ext(c, a, pos, freq, r.n_dims, r.mode, 0, 10000.0f, 1.0f, 0.0f,
                                                        1.0f, 1.0f, 1.0f);
                               },
                               false});
            }
        }
    }
    // Flash attention of one query row per head (token generation), f16 K
    // and V, a mask, grouped-query heads (nr23); and 4 rows at once.
    struct Fa {
        int64_t hs, nr2, kv, nb;
    };
    std::vector<Fa> fa;
    for (int64_t kv : {4096, 8192}) {
        for (int64_t hs : {64, 128}) {
            for (int64_t nr2 : {1, 4, 8}) fa.push_back({hs, nr2, kv, 1});
        }
    }
    fa.push_back({64, 8, 7680, 1});
    fa.push_back({64, 8, 7680, 4});
    for (const Fa & f : fa) {
        out.push_back({"FLASH_ATTN_EXT(hsk=" + std::to_string(f.hs) + ",hsv=" + std::to_string(f.hs) +
                           ",nh=8,nr23=[" + std::to_string(f.nr2) + ",1],kv=" + std::to_string(f.kv) +
                           ",nb=" + std::to_string(f.nb) + ",mask=1,type_K=f16,type_V=f16)",
                       [f](ggml_context * c) {
                           ggml_tensor * q = ggml_new_tensor_4d(c, GGML_TYPE_F32, f.hs, f.nb, 8 * f.nr2, 1);
                           ggml_tensor * k = ggml_new_tensor_4d(c, GGML_TYPE_F16, f.hs, f.kv, 8, 1);
                           ggml_tensor * v = ggml_new_tensor_4d(c, GGML_TYPE_F16, f.hs, f.kv, 8, 1);
                           ggml_tensor * m =
                               ggml_new_tensor_2d(c, GGML_TYPE_F16, f.kv, f.nb);
                           ggml_tensor * r = ggml_flash_attn_ext(c, q, k, v, m, 1.0f / std::sqrt(float(f.hs)), 0.0f, 0.0f);
                           ggml_prec_set_acc(r, GGML_PREC_F32);
                           return r;
                       },
                       false});
    }
    // Operators of convolutional and recurrent models that ggml's perf list
    // lacks, at the shapes of real models: the max pool of a ResNet stem, the
    // average pools of a vision tower's patch merge (Gemma 3's 4x4 over
    // 64x64x1152) and a CNN's 2x2, and RWKV-7's time mixing (1.5B: 32 heads
    // of 64) for one token and for a 512-token prompt.
    struct Pool {
        ggml_op_pool op;
        int64_t      w, h, c;
        int          k, s, pad;
    };
    for (const Pool & q : {Pool{GGML_OP_POOL_MAX, 112, 112, 64, 3, 2, 1}, Pool{GGML_OP_POOL_AVG, 64, 64, 1152, 4, 4, 0},
                           Pool{GGML_OP_POOL_AVG, 56, 56, 256, 2, 2, 0}}) {
        out.push_back({std::string("POOL_2D(pool_type=") + (q.op == GGML_OP_POOL_MAX ? "max" : "avg") +
                           ",type_input=f32,ne_input=" + shape({q.w, q.h, q.c, 1}) + ",k=" + std::to_string(q.k) +
                           ",s=" + std::to_string(q.s) + ",p=" + std::to_string(q.pad) + ")",
                       [q](ggml_context * c) {
                           return ggml_pool_2d(c, ggml_new_tensor_4d(c, GGML_TYPE_F32, q.w, q.h, q.c, 1), q.op, q.k, q.k,
                                               q.s, q.s, float(q.pad), float(q.pad));
                       },
                       false});
    }
    for (int64_t tokens : {1, 512}) {
        out.push_back({"RWKV_WKV7(type=f32,head_count=32,head_size=64,n_seq_tokens=" + std::to_string(tokens) +
                           ",n_seqs=1)",
                       [tokens](ggml_context * c) {
                           auto in = [&] { return ggml_new_tensor_3d(c, GGML_TYPE_F32, 64, 32, tokens); };
                           ggml_tensor * r = in(), * w = in(), * k = in(), * v = in(), * a = in(), * b = in();
                           ggml_tensor * state = ggml_new_tensor_2d(c, GGML_TYPE_F32, 64 * 64 * 32, 1);
                           return ggml_rwkv_wkv7(c, r, w, k, v, a, b, state);
                       },
                       false});
    }
    return out;
}

// Bytes an op reads and writes, as ggml's perf mode counts them.
size_t op_bytes(const ggml_tensor * t) {
    size_t n = ggml_nbytes(t);
    for (const ggml_tensor * s : t->src) {
        if (s != nullptr) n += ggml_nbytes(s);
    }
    return n;
}

double op_flops(const ggml_tensor * t) {
    return 2.0 * double(t->src[0]->ne[0]) * double(ggml_nelements(t));
}

void fill(ggml_tensor * t, std::mt19937 & rng) {
    if (t->view_src != nullptr) {
        t = t->view_src;
    }
    const int64_t n = ggml_nelements(t);
    if (t->type == GGML_TYPE_I32) {
        // Positions.
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = int32_t(i);
        ggml_backend_tensor_set(t, pos.data(), 0, ggml_nbytes(t));
        return;
    }
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    v(static_cast<size_t>(n));
    for (float & x : v) x = u(rng);
    if (t->type == GGML_TYPE_F32) {
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        return;
    }
    std::vector<char> q(ggml_nbytes(t));
    ggml_quantize_chunk(t->type, v.data(), q.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
    ggml_backend_tensor_set(t, q.data(), 0, q.size());
}

} // namespace

int main(int argc, char ** argv) {
    int         threads  = int(std::max(1u, std::thread::hardware_concurrency() / 2));
    double      min_time = 1.0;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (std::strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
            min_time = std::atof(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: %s [--threads N] [--only TEXT] [--min-time SECONDS]\n", argv[0]);
            return 2;
        }
    }
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_cpu_set_n_threads(cpu.get(), threads);
    std::printf("%s CPU backend, %d threads\n", LOOM_BACKEND_API_VERSION > 0 ? "loom" : "ggml", threads);
    std::mt19937 rng(42);
    for (const Case & c : cases()) {
        if (!only.empty() && c.label.find(only) == std::string::npos) continue;
        constexpr size_t graph_nodes = 8192;
        ggml_init_params p = {16 * ggml_tensor_overhead() + ggml_graph_overhead_custom(graph_nodes, false), nullptr, true};
        ggml_context_ptr ctx(ggml_init(p));
        ggml_tensor *    out = c.build(ctx.get());
        ggml_cgraph *    gf  = ggml_new_graph_custom(ctx.get(), graph_nodes, false);
        ggml_build_forward_expand(gf, out);
        ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), cpu.get()));
        for (ggml_tensor * s : out->src) {
            if (s != nullptr) fill(s, rng);
        }
        ggml_backend_graph_compute(cpu.get(), gf); // warm-up
        const double target = c.flops ? 8e9 / op_flops(out) : double(size_t(8) << 30) / double(op_bytes(out));
        const int    n_ops  = int(std::min<double>(double(graph_nodes) - ggml_graph_n_nodes(gf), target)) + 1;
        for (int i = 1; i < n_ops; ++i) ggml_graph_add_node(gf, out);
        int        runs = 0;
        const auto t0   = std::chrono::steady_clock::now();
        double     el   = 0;
        do {
            ggml_backend_graph_compute(cpu.get(), gf);
            runs += n_ops;
            el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } while (el < min_time);
        const double us = el / runs * 1e6;
        if (c.flops) {
            std::printf("  %-70s %6d runs - %10.2f us/run - %8.2f GFLOPS\n", c.label.c_str(), runs, us,
                        op_flops(out) / us * 1e-3);
        } else {
            std::printf("  %-70s %6d runs - %10.2f us/run - %8.2f GB/s\n", c.label.c_str(), runs, us,
                        double(op_bytes(out)) / us * 1e-3);
        }
        std::fflush(stdout);
    }
    return 0;
}
