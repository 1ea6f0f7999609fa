#pragma once

// Split states, a split-state callback driven by tensor names, and a
// transformer block run on a meta device and on one CPU backend, for the
// meta device's tests.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace loomtest::meta {

using State = ggml_backend_meta_split_state;

inline State mirrored() {
    State s{};
    s.axis       = GGML_BACKEND_SPLIT_AXIS_MIRRORED;
    s.nr[0]      = 1;
    s.n_segments = 1;
    return s;
}

// One segment: member j gets counts[j] elements along axis.
inline State split(int axis, const std::vector<int64_t> & counts) {
    State s{};
    s.axis       = ggml_backend_meta_split_axis(axis);
    s.nr[0]      = 1;
    s.n_segments = 1;
    for (size_t j = 0; j < counts.size(); ++j) s.ne[j] = counts[j];
    return s;
}

// Segments given as lists of member counts.
inline State segmented(int axis, const std::vector<std::vector<int64_t>> & segs) {
    State s{};
    s.axis       = ggml_backend_meta_split_axis(axis);
    s.n_segments = uint32_t(segs.size());
    for (size_t g = 0; g < segs.size(); ++g) {
        s.nr[g] = 1;
        for (size_t j = 0; j < segs[g].size(); ++j) s.ne[g * segs[g].size() + j] = segs[g][j];
    }
    return s;
}

// Split states by tensor name; everything else is mirrored.
struct Plan {
    std::map<std::string, State> states;
};

inline State plan_state(const ggml_tensor * t, void * ud) {
    const Plan & p  = *static_cast<Plan *>(ud);
    auto         it = p.states.find(ggml_get_name(t));
    return it == p.states.end() ? mirrored() : it->second;
}

inline ggml_backend_dev_t cpu_dev() {
    return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
}

// A meta device over n CPU members split by plan (which must outlive the
// device: the registry keeps the devices), its backend, a context for one
// graph's tensors and, after alloc(), a meta buffer holding them.
struct MetaGraph {
    ggml_backend_dev_t    meta    = nullptr;
    ggml_backend_t        backend = nullptr;
    ggml_context *        ctx     = nullptr;
    ggml_backend_buffer_t buf     = nullptr;

    MetaGraph(size_t n_members, Plan * plan, size_t n_tensors = 64) {
        std::vector<ggml_backend_dev_t> devs(n_members, cpu_dev());
        meta    = ggml_backend_meta_device(devs.data(), devs.size(), plan_state, plan);
        backend = ggml_backend_dev_init(meta, nullptr);
        ctx     = ggml_init({n_tensors * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    }
    ~MetaGraph() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(backend);
    }
    MetaGraph(const MetaGraph &)             = delete;
    MetaGraph & operator=(const MetaGraph &) = delete;

    bool alloc() {
        buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(meta));
        return buf != nullptr;
    }
};

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float>                    v(n);
    for (float & x : v) x = d(rng);
    return v;
}

// A transformer block: attention with heads split over the members (fused
// QKV weight in three segments), the output projection's columns split
// (partial sums, all-reduce), a gated FFN split by hidden rows, mirrored norms.
constexpr int64_t kHd = 4, kHeads = 6, kD = kHd * kHeads, kT = 5, kFf = 18;

struct Weights {
    std::vector<float> qkv, wo, up, gate, down, norm, x;
    Weights()
        : qkv(random_floats(size_t(kD * 3 * kD), 1)), wo(random_floats(size_t(kD * kD), 2)),
          up(random_floats(size_t(kD * kFf), 3)), gate(random_floats(size_t(kD * kFf), 4)),
          down(random_floats(size_t(kFf * kD), 5)), norm(random_floats(size_t(kD), 6)),
          x(random_floats(size_t(kD * kT), 7)) {}
};

struct Block {
    ggml_context * wctx = nullptr;
    ggml_tensor *  qkv, *wo, *up, *gate, *down, *norm;
};

inline Block make_weights(ggml_backend_buffer_type_t buft, const Weights & w, ggml_backend_buffer_t * buf) {
    ggml_init_params ip{16 * ggml_tensor_overhead(), nullptr, true};
    Block            b;
    b.wctx = ggml_init(ip);
    b.qkv  = ggml_new_tensor_2d(b.wctx, GGML_TYPE_F32, kD, 3 * kD);
    b.wo   = ggml_new_tensor_2d(b.wctx, GGML_TYPE_F32, kD, kD);
    b.up   = ggml_new_tensor_2d(b.wctx, GGML_TYPE_F32, kD, kFf);
    b.gate = ggml_new_tensor_2d(b.wctx, GGML_TYPE_F32, kD, kFf);
    b.down = ggml_new_tensor_2d(b.wctx, GGML_TYPE_F32, kFf, kD);
    b.norm = ggml_new_tensor_1d(b.wctx, GGML_TYPE_F32, kD);
    ggml_set_name(b.qkv, "qkv");
    ggml_set_name(b.wo, "wo");
    ggml_set_name(b.up, "up");
    ggml_set_name(b.gate, "gate");
    ggml_set_name(b.down, "down");
    ggml_set_name(b.norm, "norm");
    *buf = ggml_backend_alloc_ctx_tensors_from_buft(b.wctx, buft);
    EXPECT_NE(*buf, nullptr);
    ggml_backend_tensor_set(b.qkv, w.qkv.data(), 0, ggml_nbytes(b.qkv));
    ggml_backend_tensor_set(b.wo, w.wo.data(), 0, ggml_nbytes(b.wo));
    ggml_backend_tensor_set(b.up, w.up.data(), 0, ggml_nbytes(b.up));
    ggml_backend_tensor_set(b.gate, w.gate.data(), 0, ggml_nbytes(b.gate));
    ggml_backend_tensor_set(b.down, w.down.data(), 0, ggml_nbytes(b.down));
    ggml_backend_tensor_set(b.norm, w.norm.data(), 0, ggml_nbytes(b.norm));
    return b;
}

inline ggml_tensor * build_block(ggml_context * ctx, const Block & b, ggml_tensor * x) {
    ggml_tensor * h   = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), b.norm);
    ggml_tensor * qkv = ggml_mul_mat(ctx, b.qkv, h); // [3D, T]
    auto          part = [&](int i) {
        ggml_tensor * v = ggml_view_2d(ctx, qkv, kD, kT, qkv->nb[1], size_t(i) * kD * sizeof(float));
        return ggml_reshape_3d(ctx, ggml_cont(ctx, v), kHd, kHeads, kT); // [hd, H, T]
    };
    ggml_tensor * q   = ggml_permute(ctx, part(0), 0, 2, 1, 3); // [hd, T, H]
    ggml_tensor * k   = ggml_permute(ctx, part(1), 0, 2, 1, 3);
    ggml_tensor * v   = ggml_cont(ctx, ggml_permute(ctx, part(2), 1, 2, 0, 3)); // [T, hd, H]
    ggml_tensor * kq  = ggml_soft_max(ctx, ggml_scale(ctx, ggml_mul_mat(ctx, k, q), 0.5f)); // [T, T, H]
    ggml_tensor * kqv = ggml_mul_mat(ctx, v, kq);                                          // [hd, T, H]
    ggml_tensor * att = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), kD, kT);    // [D, T]
    ggml_tensor * x1  = ggml_add(ctx, x, ggml_mul_mat(ctx, b.wo, att));
    ggml_tensor * h2  = ggml_mul(ctx, ggml_rms_norm(ctx, x1, 1e-5f), b.norm);
    ggml_tensor * g   = ggml_mul(ctx, ggml_silu(ctx, ggml_mul_mat(ctx, b.gate, h2)), ggml_mul_mat(ctx, b.up, h2));
    return ggml_add(ctx, x1, ggml_mul_mat(ctx, b.down, g));
}

// Runs the block with weights in buft on backend (through the scheduler with
// the CPU when sched_with_cpu) and returns the output.
// before_compute, when given, runs once the weights and inputs are in place.
inline std::vector<float> run_block(ggml_backend_t backend, ggml_backend_buffer_type_t buft, bool sched_with_cpu,
                                    ggml_status * status, const std::function<void()> & before_compute = {}) {
    const Weights         w;
    ggml_backend_buffer_t wbuf = nullptr;
    Block                 b    = make_weights(buft, w, &wbuf);
    ggml_init_params      ip{256 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context *        ctx = ggml_init(ip);
    ggml_tensor *         x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kD, kT);
    ggml_set_name(x, "x");
    ggml_set_input(x);
    ggml_tensor * out = build_block(ctx, b, x);
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    std::vector<float> y(size_t(kD * kT), NAN);
    if (sched_with_cpu) {
        ggml_backend_t        cpu        = ggml_backend_cpu_init();
        ggml_backend_t        backends[] = {backend, cpu};
        ggml_backend_sched_t  sched      = ggml_backend_sched_new(backends, nullptr, 2, 1024, false, true);
        EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
        ggml_backend_tensor_set(x, w.x.data(), 0, ggml_nbytes(x));
        if (before_compute) before_compute();
        *status = ggml_backend_sched_graph_compute(sched, gf);
        if (*status == GGML_STATUS_SUCCESS) ggml_backend_tensor_get(out, y.data(), 0, ggml_nbytes(out));
        ggml_backend_sched_free(sched);
        ggml_backend_free(cpu);
    } else {
        ggml_gallocr_t ga = ggml_gallocr_new(buft);
        EXPECT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
        ggml_backend_tensor_set(x, w.x.data(), 0, ggml_nbytes(x));
        if (before_compute) before_compute();
        *status = ggml_backend_graph_compute(backend, gf);
        if (*status == GGML_STATUS_SUCCESS) ggml_backend_tensor_get(out, y.data(), 0, ggml_nbytes(out));
        ggml_gallocr_free(ga);
    }
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(b.wctx);
    return y;
}

// Heads split as heads[j]; FFN rows as ff[j].
inline Plan block_plan(const std::vector<int64_t> & heads, const std::vector<int64_t> & ff) {
    std::vector<int64_t> cols;
    for (int64_t h : heads) cols.push_back(h * kHd);
    Plan p;
    p.states["qkv"]  = segmented(1, {cols, cols, cols});
    p.states["wo"]   = split(0, cols);
    p.states["up"]   = split(1, ff);
    p.states["gate"] = split(1, ff);
    p.states["down"] = split(0, ff);
    return p;
}

inline void expect_close(const std::vector<float> & a, const std::vector<float> & b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::fabs(b[i]))) << "at " << i;
    }
}

inline std::vector<float> reference_block() {
    ggml_backend_t     cpu = ggml_backend_cpu_init();
    ggml_status        st  = GGML_STATUS_FAILED;
    std::vector<float> y   = run_block(cpu, ggml_backend_cpu_buffer_type(), false, &st);
    EXPECT_EQ(st, GGML_STATUS_SUCCESS);
    ggml_backend_free(cpu);
    return y;
}

// The block on a meta device over devs split by plan (which must outlive
// the device), alone or in a scheduler beside the CPU, against the CPU alone.
inline void expect_block_on(const std::vector<ggml_backend_dev_t> & devs, Plan * plan, bool sched) {
    std::vector<ggml_backend_dev_t> d    = devs;
    ggml_backend_dev_t              meta = ggml_backend_meta_device(d.data(), d.size(), plan_state, plan);
    ggml_backend_t                  mb   = ggml_backend_dev_init(meta, nullptr);
    ASSERT_NE(mb, nullptr);
    ggml_status        st = GGML_STATUS_FAILED;
    std::vector<float> y  = run_block(mb, ggml_backend_dev_buffer_type(meta), sched, &st);
    ggml_backend_free(mb);
    ASSERT_EQ(st, GGML_STATUS_SUCCESS);
    expect_close(y, reference_block());
}

} // namespace loomtest::meta
