// Normalisations, softmax, masking, rotary embeddings and sorting against the
// double reference.
//
// Thresholds (NMSE unless stated):
//   norm, rms_norm, group_norm    1e-10  float sums over a row or group
//   soft_max, soft_max_ext        1e-10  and max abs 1e-6 (probabilities)
//   diag_mask_inf                 exact, -inf where masked
//   rope f32                      1e-9   angles up to ~200 rad carry ~1e-5 rad when held in float
//   rope f16                      1e-6   the result is stored in f16
//   argsort, top_k                exact indices

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kF32  = 1e-10;
constexpr double kRope = 1e-9;
constexpr double kF16  = 1e-6;
constexpr double kInf  = INFINITY;

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

} // namespace

TEST(OpsNorm, NormAndRmsNorm) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 129), odd_size(rng, 1, 9), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A = fill_random(a, rng, -1.0, 2.0);
        SCOPED_TRACE(shape_str(s));
        for (float eps : {1e-6f, 1e-2f}) {
            check_modes(ctx, ggml_norm(ctx, a, eps), ref::norm(A, double(eps)), kF32);
            check_modes(ctx, ggml_rms_norm(ctx, a, eps), ref::rms_norm(A, double(eps)), kF32);
        }
    }
}

TEST(OpsNorm, LongRows) {
    std::mt19937  rng(61);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4099, 3);
    const Array   A = fill_random(a, rng, -1.0, 3.0);
    check_modes(ctx, ggml_norm(ctx, a, 1e-5f), ref::norm(A, double(1e-5f)), kF32);
    check_modes(ctx, ggml_rms_norm(ctx, a, 1e-5f), ref::rms_norm(A, double(1e-5f)), kF32);
    check_modes(ctx, ggml_soft_max(ctx, a), ref::soft_max(A, nullptr, 1.0, 0.0), kF32, 1e-6);
}

TEST(OpsNorm, NonContiguousSource) {
    std::mt19937  rng(67);
    Context       ctx;
    ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 40, 5, 3);
    fill_random(base, rng, -2.0, 1.0);
    ggml_tensor * view = ggml_view_3d(ctx, base, 33, 5, 3, base->nb[1], base->nb[2], 4 * sizeof(float));
    ggml_tensor * a    = ggml_permute(ctx, view, 0, 2, 1, 3);
    const Array   A    = read_tensor(a);
    check_modes(ctx, ggml_norm(ctx, a, 1e-5f), ref::norm(A, double(1e-5f)), kF32);
    check_modes(ctx, ggml_rms_norm(ctx, a, 1e-5f), ref::rms_norm(A, double(1e-5f)), kF32);
}

// Rows whose elements are apart (dims 0 and 1 swapped, as test-backend-ops'
// noncontig_rows): gathered into dst, then normalised; in place, such a row
// has nowhere of its own to go and is refused.
TEST(OpsNorm, TransposedRows) {
    std::mt19937  rng(73);
    Context       ctx;
    ggml_tensor * base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 67, 2, 3);
    fill_random(base, rng, -2.0, 1.0);
    ggml_tensor * a = ggml_permute(ctx, base, 1, 0, 2, 3); // [67, 5, 2, 3], elements 5 floats apart
    const Array   A = read_tensor(a);
    check_modes(ctx, ggml_norm(ctx, a, 1e-5f), ref::norm(A, double(1e-5f)), kF32);
    check_modes(ctx, ggml_rms_norm(ctx, a, 1e-5f), ref::rms_norm(A, double(1e-5f)), kF32);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    EXPECT_TRUE(ggml_backend_supports_op(cpu, ggml_norm(ctx, a, 1e-5f)));
    EXPECT_FALSE(ggml_backend_supports_op(cpu, ggml_norm_inplace(ctx, a, 1e-5f)));
    EXPECT_FALSE(ggml_backend_supports_op(cpu, ggml_group_norm(ctx, a, 1, 1e-5f)));
    ggml_backend_free(cpu);
}

TEST(OpsNorm, Inplace) {
    std::mt19937  rng(71);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 65, 3);
    const Array   A   = fill_random(a, rng);
    ggml_tensor * out = ggml_rms_norm_inplace(ctx, a, 1e-6f);
    ASSERT_EQ(out->data, a->data);
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, ref::rms_norm(A, double(1e-6f)), kF32));
}

TEST(OpsNorm, GroupNorm) {
    struct Case {
        Shape shape;
        int   n_groups;
    };
    // Groups of ceil(channels / n_groups) channels; the last group may be smaller.
    const Case cases[] = {
        {{5, 3, 10, 2}, 4},
        {{7, 4, 6, 1}, 3},
        {{9, 1, 5, 2}, 1},
        {{3, 5, 7, 1}, 7},
    };
    std::mt19937 rng(73);
    for (const Case & c : cases) {
        SCOPED_TRACE(shape_str(c.shape) + " groups " + std::to_string(c.n_groups));
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, c.shape);
        const Array   A = fill_random(a, rng, -1.0, 3.0);
        check_modes(ctx, ggml_group_norm(ctx, a, c.n_groups, 1e-6f), ref::group_norm(A, c.n_groups, double(1e-6f)),
                    kF32);
    }
}

TEST(OpsSoftMax, Plain) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 65), odd_size(rng, 1, 9), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A = fill_random(a, rng, -5.0, 5.0);
        SCOPED_TRACE(shape_str(s));
        check_modes(ctx, ggml_soft_max(ctx, a), ref::soft_max(A, nullptr, 1.0, 0.0), kF32, 1e-6);
    }
}

namespace {

// Random mask values with -inf at about a quarter of the positions, never in
// column 0, so that no row is masked out completely.
Array fill_mask(ggml_tensor * mask, std::mt19937 & rng) {
    Array                                  m = random_array(shape_of(mask), rng, -2.0, 2.0);
    std::uniform_int_distribution<int>     pick(0, 3);
    for (int64_t i = 0; i < m.size(); ++i) {
        if (i % m.ne[0] != 0 && pick(rng) == 0) {
            m.v[size_t(i)] = -kInf;
        }
    }
    write_tensor(mask, m);
    return read_tensor(mask);
}

} // namespace

TEST(OpsSoftMax, ExtMaskScaleAlibi) {
    struct Case {
        Shape a;
        Shape mask;
        float scale;
        float max_bias;
    };
    const Case cases[] = {
        {{37, 7, 4, 2}, {37, 7, 1, 1}, 0.7f, 0.0f},
        {{37, 7, 4, 2}, {37, 10, 1, 1}, 1.3f, 0.0f},  // the mask has more rows than a
        {{21, 5, 6, 2}, {21, 5, 6, 2}, 0.125f, 0.0f}, // one mask per head and batch
        {{21, 5, 6, 2}, {21, 5, 3, 1}, 1.0f, 0.0f},   // broadcast over heads and batch
        {{19, 3, 4, 1}, {19, 3, 1, 1}, 0.5f, 8.0f},   // ALiBi, n_head a power of two
        {{19, 3, 6, 2}, {19, 4, 2, 1}, 0.9f, 8.0f},   // ALiBi, heads 4 and 5 use m1
        {{1, 3, 5, 1}, {1, 3, 1, 1}, 2.0f, 4.0f},
    };
    std::mt19937 rng(79);
    for (ggml_type mask_type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (const Case & c : cases) {
            SCOPED_TRACE(std::string("mask ") + ggml_type_name(mask_type) + " " + shape_str(c.mask) + " a " +
                         shape_str(c.a) + " scale " + std::to_string(c.scale) + " max_bias " +
                         std::to_string(c.max_bias));
            Context       ctx;
            ggml_tensor * a    = new_tensor(ctx, GGML_TYPE_F32, c.a);
            ggml_tensor * mask = new_tensor(ctx, mask_type, c.mask);
            const Array   A    = fill_random(a, rng, -4.0, 4.0);
            const Array   M    = fill_mask(mask, rng);
            check_modes(ctx, ggml_soft_max_ext(ctx, a, mask, c.scale, c.max_bias),
                        ref::soft_max(A, &M, double(c.scale), double(c.max_bias)), kF32, 1e-6);
        }
    }
}

// Sinks: one logit per head joins each row's denominator; with and without
// a mask, sinks above and below the row's logits.
TEST(OpsSoftMax, Sinks) {
    std::mt19937 rng(81);
    for (bool with_mask : {false, true}) {
        SCOPED_TRACE(with_mask ? "mask" : "no mask");
        Context       ctx;
        ggml_tensor * a     = new_tensor(ctx, GGML_TYPE_F32, {29, 5, 6, 2});
        ggml_tensor * mask  = with_mask ? new_tensor(ctx, GGML_TYPE_F16, {29, 5, 1, 1}) : nullptr;
        ggml_tensor * sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6);
        const Array   A     = fill_random(a, rng, -4.0, 4.0);
        Array         M;
        if (mask != nullptr) M = fill_mask(mask, rng);
        const float         sv[6] = {-8.0f, -1.0f, 0.0f, 2.5f, 6.0f, 30.0f};
        std::vector<double> S(sv, sv + 6);
        std::memcpy(sinks->data, sv, sizeof(sv));
        ggml_tensor * out = ggml_soft_max_ext(ctx, a, mask, 0.8f, 0.0f);
        ggml_soft_max_add_sinks(out, sinks);
        EXPECT_EQ(out->src[2], sinks);
        check_modes(ctx, out, ref::soft_max(A, mask != nullptr ? &M : nullptr, double(0.8f), 0.0, &S), kF32, 1e-6);
    }
    Context       ctx;
    ggml_tensor * a   = new_tensor(ctx, GGML_TYPE_F32, {8, 2, 3, 1});
    ggml_tensor * out = ggml_soft_max(ctx, a);
    EXPECT_DEATH(ggml_soft_max_add_sinks(out, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)), "one value per head");
    EXPECT_DEATH(ggml_soft_max_add_sinks(out, ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 3)), "must be f32");
    EXPECT_DEATH(ggml_soft_max_add_sinks(ggml_scale(ctx, a, 2.0f), ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)),
                 "not SOFT_MAX");
    ggml_soft_max_add_sinks(out, nullptr);
    EXPECT_EQ(out->src[2], nullptr);
}

TEST(OpsSoftMax, ExtWithoutMask) {
    std::mt19937  rng(83);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 33, 5, 2);
    const Array   A = fill_random(a, rng, -3.0, 3.0);
    check_modes(ctx, ggml_soft_max_ext(ctx, a, nullptr, 0.3f, 0.0f), ref::soft_max(A, nullptr, double(0.3f), 0.0),
                kF32, 1e-6);
}

TEST(OpsSoftMax, ExtInplace) {
    std::mt19937  rng(89);
    Context       ctx;
    ggml_tensor * a    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 17, 4, 3);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 17, 4);
    const Array   A    = fill_random(a, rng, -3.0, 3.0);
    const Array   M    = fill_mask(mask, rng);
    ggml_tensor * out  = ggml_soft_max_ext_inplace(ctx, a, mask, 0.25f, 0.0f);
    ASSERT_EQ(out->data, a->data);
    ASSERT_EQ(compute(ctx, out, 3), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, ref::soft_max(A, &M, 0.25, 0.0), kF32, 1e-6));
}

TEST(OpsSoftMax, DiagMaskInf) {
    std::mt19937 rng(97);
    for (int n_past : {0, 3}) {
        SCOPED_TRACE("n_past " + std::to_string(n_past));
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 11, 7, 3);
        const Array   A = fill_random(a, rng);
        check_modes(ctx, ggml_diag_mask_inf(ctx, a, n_past), ref::diag_mask_inf(A, n_past), 0.0, 0.0);
    }
}

TEST(OpsSoftMax, DiagMaskInfThenSoftMax) {
    std::mt19937  rng(101);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 9, 9, 2);
    const Array   A   = fill_random(a, rng, -2.0, 2.0);
    ggml_tensor * out = ggml_soft_max(ctx, ggml_diag_mask_inf_inplace(ctx, ggml_scale(ctx, a, 0.5f), 0));
    check_modes(ctx, out, ref::soft_max(ref::diag_mask_inf(ref::scale(A, 0.5, 0.0), 0), nullptr, 1.0, 0.0), kF32,
                1e-6);
}

namespace {

struct RopeCase {
    int64_t head_dim;
    int     n_dims;
    int     mode;
    float   freq_base;
    float   freq_scale;
    float   ext_factor;
    float   attn_factor;
    bool    freq_factors;
    int     n_ctx_orig;
};

std::string describe(const RopeCase & c) {
    return "head_dim " + std::to_string(c.head_dim) + " n_dims " + std::to_string(c.n_dims) + " mode " +
           std::to_string(c.mode) + " base " + std::to_string(c.freq_base) + " freq_scale " +
           std::to_string(c.freq_scale) + " ext_factor " + std::to_string(c.ext_factor) + " attn_factor " +
           std::to_string(c.attn_factor) + (c.freq_factors ? " with freq factors" : "");
}

const RopeCase kRopeCases[] = {
    {32, 32, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {32, 32, GGML_ROPE_TYPE_NEOX, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {40, 24, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {40, 24, GGML_ROPE_TYPE_NEOX, 500000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {24, 16, GGML_ROPE_TYPE_NEOX, 10000.0f, 0.25f, 0.0f, 0.8f, false, 0},
    {24, 16, GGML_ROPE_TYPE_NORMAL, 10000.0f, 0.5f, 0.0f, 1.0f, true, 0},
    {32, 32, GGML_ROPE_TYPE_NEOX, 1000000.0f, 1.0f, 0.0f, 1.0f, true, 0},
    {32, 32, GGML_ROPE_TYPE_NORMAL, 10000.0f, 0.25f, 1.0f, 1.0f, false, 4096},
    {48, 32, GGML_ROPE_TYPE_NEOX, 10000.0f, 0.125f, 1.0f, 0.9f, true, 2048},
    {32, 32, GGML_ROPE_TYPE_NEOX, 10000.0f, 0.5f, 0.5f, 1.0f, false, 4096},
};

ref::RopeParams rope_params(const RopeCase & c) {
    ref::RopeParams p;
    p.n_dims      = c.n_dims;
    p.mode        = c.mode;
    p.n_ctx_orig  = c.n_ctx_orig;
    p.freq_base   = double(c.freq_base);
    p.freq_scale  = double(c.freq_scale);
    p.ext_factor  = double(c.ext_factor);
    p.attn_factor = double(c.attn_factor);
    p.beta_fast   = 32.0;
    p.beta_slow   = 1.0;
    float dims[2];
    ggml_rope_yarn_corr_dims(c.n_dims, c.n_ctx_orig, c.freq_base, 32.0f, 1.0f, dims);
    p.corr_dims[0] = double(dims[0]);
    p.corr_dims[1] = double(dims[1]);
    return p;
}

struct RopeInputs {
    ggml_tensor *        pos = nullptr;
    ggml_tensor *        ff  = nullptr;
    std::vector<int32_t> positions;
    std::vector<double>  factors;
};

RopeInputs rope_inputs(ggml_context * ctx, std::mt19937 & rng, int64_t n_tokens, const RopeCase & c) {
    RopeInputs in;
    in.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    for (int64_t i = 0; i < n_tokens; ++i) {
        in.positions.push_back(int32_t(rand_int(rng, 0, 200)));
    }
    Array p(Shape{n_tokens, 1, 1, 1});
    for (int64_t i = 0; i < n_tokens; ++i) {
        p.v[size_t(i)] = in.positions[size_t(i)];
    }
    write_tensor(in.pos, p);
    if (c.freq_factors) {
        in.ff            = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, c.n_dims / 2);
        const Array f    = fill_random(in.ff, rng, 1.0, 4.0);
        in.factors       = f.v;
    }
    return in;
}

ggml_tensor * rope_op(ggml_context * ctx, ggml_tensor * a, const RopeInputs & in, const RopeCase & c) {
    return ggml_rope_ext(ctx, a, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                         c.ext_factor, c.attn_factor, 32.0f, 1.0f);
}

} // namespace

TEST(OpsRope, YarnCorrDims) {
    // The dimension whose wavelength fits n_rot turns in the original context.
    auto corr_dim = [](double n_dims, double n_ctx, double n_rot, double base) {
        return n_dims * std::log(n_ctx / (n_rot * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    float dims[2];
    ggml_rope_yarn_corr_dims(32, 4096, 10000.0f, 32.0f, 1.0f, dims);
    EXPECT_EQ(dims[0], std::floor(corr_dim(32, 4096, 32, 10000)));
    EXPECT_EQ(dims[1], std::ceil(corr_dim(32, 4096, 1, 10000)));
    EXPECT_EQ(dims[0], 5.0f);
    EXPECT_EQ(dims[1], 12.0f);
    // Clamped to [0, n_dims - 1].
    ggml_rope_yarn_corr_dims(16, 1000000000, 10000.0f, 32.0f, 1.0f, dims);
    EXPECT_EQ(dims[1], 15.0f);
    ggml_rope_yarn_corr_dims(16, 64, 10000.0f, 32.0f, 1.0f, dims);
    EXPECT_EQ(dims[0], 0.0f);
}

TEST(OpsRope, ExtF32) {
    for (const RopeCase & c : kRopeCases) {
        SCOPED_TRACE(describe(c));
        std::mt19937     rng(103);
        Context          ctx;
        const int64_t    n_head = odd_size(rng, 1, 5), n_tokens = odd_size(rng, 3, 9);
        ggml_tensor *    a  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, c.head_dim, n_head, n_tokens);
        const Array      A  = fill_random(a, rng);
        const RopeInputs in = rope_inputs(ctx, rng, n_tokens, c);
        check_modes(ctx, rope_op(ctx, a, in, c),
                    ref::rope(A, in.positions, c.freq_factors ? &in.factors : nullptr, rope_params(c)), kRope);
    }
}

TEST(OpsRope, ExtF16) {
    for (const RopeCase & c : kRopeCases) {
        SCOPED_TRACE(describe(c));
        std::mt19937     rng(107);
        Context          ctx;
        const int64_t    n_head = 3, n_tokens = 5;
        ggml_tensor *    a  = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, c.head_dim, n_head, n_tokens);
        const Array      A  = fill_random(a, rng);
        const RopeInputs in = rope_inputs(ctx, rng, n_tokens, c);
        ggml_tensor *    out = rope_op(ctx, a, in, c);
        ASSERT_EQ(out->type, GGML_TYPE_F16);
        check_modes(ctx, out, ref::rope(A, in.positions, c.freq_factors ? &in.factors : nullptr, rope_params(c)),
                    kF16);
    }
}

TEST(OpsRope, NonContiguousSource) {
    // Heads taken out of a fused projection: rows of head_dim inside rows of 3 * head_dim.
    const RopeCase c = kRopeCases[3];
    std::mt19937   rng(109);
    Context        ctx;
    const int64_t  n_head = 3, n_tokens = 7;
    ggml_tensor *  fused = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3 * c.head_dim, n_head, n_tokens);
    fill_random(fused, rng);
    ggml_tensor * a = ggml_view_3d(ctx, fused, c.head_dim, n_head, n_tokens, fused->nb[1], fused->nb[2],
                                   size_t(c.head_dim) * sizeof(float));
    const Array      A  = read_tensor(a);
    const RopeInputs in = rope_inputs(ctx, rng, n_tokens, c);
    check_modes(ctx, rope_op(ctx, a, in, c), ref::rope(A, in.positions, nullptr, rope_params(c)), kRope);
}

TEST(OpsRope, PlainRopeAndInplace) {
    std::mt19937  rng(113);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 3, 5);
    const Array   A   = fill_random(a, rng);
    RopeCase      c   = {16, 12, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0};
    RopeInputs    in  = rope_inputs(ctx, rng, 5, c);
    const Array   want = ref::rope(A, in.positions, nullptr, rope_params(c));
    check_modes(ctx, ggml_rope(ctx, a, in.pos, c.n_dims, c.mode), want, kRope);

    ggml_tensor * out = ggml_rope_ext_inplace(ctx, a, in.pos, nullptr, c.n_dims, c.mode, 0, 10000.0f, 1.0f, 0.0f,
                                              1.0f, 32.0f, 1.0f);
    ASSERT_EQ(out->data, a->data);
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, want, kRope));
}

TEST(OpsRope, ZeroDimsCopiesRows) {
    // A model whose rotary dimension count is 0 (test-llama-archs makes such models): every value
    // lies past n_dims, so each row is copied unchanged, in both modes.
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        std::mt19937  rng(127);
        Context       ctx;
        ggml_tensor * a  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 12, 3, 5);
        const Array   A  = fill_random(a, rng);
        RopeCase      c  = {12, 0, mode, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0};
        RopeInputs    in = rope_inputs(ctx, rng, 5, c);
        check_modes(ctx, rope_op(ctx, a, in, c), A, kRope);
    }
}

TEST(OpsSort, Argsort) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 65), odd_size(rng, 1, 9), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A = fill_random(a, rng, -100.0, 100.0);
        SCOPED_TRACE(shape_str(s));
        for (ggml_sort_order order : {GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC}) {
            SCOPED_TRACE(order == GGML_SORT_ORDER_ASC ? "asc" : "desc");
            ggml_tensor * out = ggml_argsort(ctx, a, order);
            ASSERT_EQ(out->type, GGML_TYPE_I32);
            check_modes(ctx, out, ref::argsort(A, order), 0.0, 0.0);
        }
    }
}

TEST(OpsSort, ArgsortLongRows) {
    std::mt19937  rng(127);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1001, 3);
    const Array   A = fill_random(a, rng, -1.0, 1.0);
    check_modes(ctx, ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC), ref::argsort(A, GGML_SORT_ORDER_DESC), 0.0, 0.0);
}

TEST(OpsSort, TopK) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 5, 99), odd_size(rng, 1, 7), rand_int(rng, 1, 3), 1};
        const int     k = int(rand_int(rng, 1, s[0]));
        SCOPED_TRACE(shape_str(s) + " k " + std::to_string(k));
        Context       ctx;
        ggml_tensor * a   = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A   = fill_random(a, rng, -50.0, 50.0);
        ggml_tensor * out = ggml_top_k(ctx, a, k);
        ASSERT_EQ(out->type, GGML_TYPE_I32);
        ASSERT_EQ(out->ne[0], k);
        const Array sorted = ref::argsort(A, GGML_SORT_ORDER_DESC);
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(describe(mode));
            ASSERT_EQ(compute(ctx, out, mode), GGML_STATUS_SUCCESS);
            const Array got = read_tensor(out);
            for (int64_t i2 = 0; i2 < s[2]; ++i2) {
                for (int64_t i1 = 0; i1 < s[1]; ++i1) {
                    std::set<int64_t> want_set, got_set;
                    for (int64_t j = 0; j < k; ++j) {
                        want_set.insert(int64_t(sorted(j, i1, i2)));
                        got_set.insert(int64_t(got(j, i1, i2)));
                    }
                    // ggml's contract: the k largest, in any order.
                    EXPECT_EQ(got_set, want_set) << "row " << i1 << ", " << i2;
                    // loom's header also promises largest first.
                    for (int64_t j = 0; j < k; ++j) {
                        EXPECT_EQ(got(j, i1, i2), sorted(j, i1, i2)) << "rank " << j << " of row " << i1 << ", " << i2;
                    }
                }
            }
        }
    }
}
