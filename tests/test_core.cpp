// The tensor core: contexts, tensors, views, shape ops, graphs, and the
// errors raised on API misuse.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ggml-cpp.h"
#include "ggml.h"

// ggml_graph_view is internal (the graph type is opaque to users).
#include "core/graph.h"
#include "core/ptr_map.h"

namespace {

ggml_context_ptr make_ctx(size_t mem, bool no_alloc) {
    ggml_init_params p = {mem, nullptr, no_alloc};
    return ggml_context_ptr(ggml_init(p));
}

TEST(Core, TypeTraitsMatchGgml) {
    EXPECT_EQ(GGML_TYPE_F32, 0);
    EXPECT_EQ(GGML_TYPE_F16, 1);
    EXPECT_EQ(GGML_TYPE_Q4_0, 2);
    EXPECT_EQ(GGML_TYPE_Q8_0, 8);
    EXPECT_EQ(GGML_TYPE_I8, 24);
    EXPECT_EQ(GGML_TYPE_I32, 26);
    EXPECT_EQ(GGML_TYPE_BF16, 30);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_Q4_0), 18u);
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_Q4_0), 32);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_Q8_0), 34u);
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_Q8_0), 32);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_BF16), 2u);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_Q4_0, 4096), 4096u / 32 * 18);
    EXPECT_STREQ(ggml_type_name(GGML_TYPE_Q8_0), "q8_0");
    EXPECT_STREQ(ggml_type_name(GGML_TYPE_BF16), "bf16");
    EXPECT_TRUE(ggml_is_quantized(GGML_TYPE_Q4_0));
    EXPECT_FALSE(ggml_is_quantized(GGML_TYPE_F16));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_Q4_0));
    EXPECT_EQ(sizeof(ggml_tensor), GGML_TENSOR_SIZE);
    EXPECT_EQ(offsetof(ggml_tensor, ne), 16u); // ggml's field layout
}

TEST(Core, ContextArenaAccountsLikeGgml) {
    // Exactly n tensor overheads fit n tensors in a no_alloc context.
    auto ctx = make_ctx(3 * ggml_tensor_overhead(), true);
    ASSERT_TRUE(ctx);
    for (int i = 0; i < 3; ++i) {
        ggml_tensor * t = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 100, 100);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->data, nullptr);
    }
    EXPECT_EQ(ggml_used_mem(ctx.get()), 3 * ggml_tensor_overhead());
    EXPECT_DEATH(ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1), "not enough space in the context");
}

TEST(Core, TensorsWithDataAndIteration) {
    auto          ctx = make_ctx(1 << 20, false);
    ggml_tensor * a   = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 5, 3, 2);
    ggml_tensor * b   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, 7);
    ggml_set_name(a, "a");
    ggml_format_name(b, "b%d", 7);
    ASSERT_NE(a->data, nullptr);
    EXPECT_EQ(ggml_nelements(a), 30);
    EXPECT_EQ(ggml_nrows(a), 6);
    EXPECT_EQ(ggml_nbytes(a), 120u);
    EXPECT_EQ(a->nb[0], 4u);
    EXPECT_EQ(a->nb[1], 20u);
    EXPECT_EQ(a->nb[2], 60u);
    EXPECT_EQ(ggml_n_dims(a), 3);
    EXPECT_EQ(ggml_get_tensor(ctx.get(), "b7"), b);
    EXPECT_EQ(ggml_get_first_tensor(ctx.get()), a);
    EXPECT_EQ(ggml_get_next_tensor(ctx.get(), a), b);
    EXPECT_EQ(ggml_get_next_tensor(ctx.get(), b), nullptr);
    EXPECT_EQ(ggml_get_max_tensor_size(ctx.get()), 120u);

    // long names are truncated, never overflow
    std::string long_name(200, 'x');
    ggml_set_name(a, long_name.c_str());
    EXPECT_EQ(std::strlen(a->name), size_t(GGML_MAX_NAME - 1));
}

TEST(Core, ViewsShareDataAndChain) {
    auto          ctx = make_ctx(1 << 20, false);
    ggml_tensor * a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 8, 4);
    ggml_tensor * v   = ggml_view_2d(ctx.get(), a, 4, 2, a->nb[1], 2 * a->nb[1] + 4 * sizeof(float));
    EXPECT_EQ(v->view_src, a);
    EXPECT_EQ(v->data, static_cast<char *>(a->data) + 2 * a->nb[1] + 16);
    EXPECT_FALSE(ggml_is_contiguous(v));
    EXPECT_TRUE(ggml_is_contiguous_rows(v));
    // a view of a view points at the original source with the summed offset
    ggml_tensor * vv = ggml_view_1d(ctx.get(), v, 2, sizeof(float));
    EXPECT_EQ(vv->view_src, a);
    EXPECT_EQ(vv->view_offs, 2 * a->nb[1] + 20);
    EXPECT_DEATH(ggml_view_1d(ctx.get(), a, 33, 0), "exceeds");
    EXPECT_DEATH(ggml_view_2d(ctx.get(), a, 8, 1, a->nb[1], ggml_nbytes(a)), "exceeds");
    // a view of no elements may start anywhere, past the source's end too
    ggml_tensor * empty = ggml_view_2d(ctx.get(), a, 8, 0, a->nb[1], ggml_nbytes(a) + 64);
    EXPECT_EQ(ggml_nelements(empty), 0);
    EXPECT_EQ(ggml_nbytes(empty), 0u);
}

TEST(Core, PermuteTransposeReshape) {
    auto          ctx = make_ctx(1 << 20, true);
    ggml_tensor * a   = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 2, 3, 5, 7);
    ggml_tensor * p   = ggml_permute(ctx.get(), a, 2, 0, 1, 3);
    EXPECT_EQ(p->ne[2], 2);
    EXPECT_EQ(p->ne[0], 3);
    EXPECT_EQ(p->ne[1], 5);
    EXPECT_EQ(p->nb[2], a->nb[0]);
    EXPECT_TRUE(ggml_is_permuted(p));
    ggml_tensor * t = ggml_transpose(ctx.get(), a);
    EXPECT_EQ(t->ne[0], 3);
    EXPECT_EQ(t->ne[1], 2);
    EXPECT_TRUE(ggml_is_transposed(t));
    ggml_tensor * r = ggml_reshape_2d(ctx.get(), a, 6, 35);
    EXPECT_EQ(r->ne[0], 6);
    EXPECT_EQ(r->ne[1], 35);
    EXPECT_EQ(r->op, GGML_OP_RESHAPE);
    EXPECT_DEATH(ggml_permute(ctx.get(), a, 0, 0, 1, 2), "not a permutation");
    EXPECT_DEATH(ggml_reshape_2d(ctx.get(), a, 6, 36), "elements");
    EXPECT_DEATH(ggml_reshape_1d(ctx.get(), p, 210), "not contiguous");
}

TEST(Core, OpConstructorsCheckShapes) {
    auto          ctx = make_ctx(1 << 20, true);
    ggml_tensor * a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 4, 3);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 5, 3);
    ggml_tensor * c   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 4, 1);
    EXPECT_DEATH(ggml_add(ctx.get(), a, b), "ggml_add: .*cannot be broadcast");
    EXPECT_DEATH(ggml_mul_mat(ctx.get(), a, b), "ggml_mul_mat: .*cannot be multiplied");
    EXPECT_DEATH(ggml_concat(ctx.get(), a, b, 1), "ggml_concat: .*differ in dimension 0");
    ggml_tensor * s = ggml_add(ctx.get(), a, c); // broadcast of c over rows
    EXPECT_TRUE(ggml_are_same_shape(s, a));
    ggml_tensor * mm = ggml_mul_mat(ctx.get(), a, ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 4, 6, 2));
    EXPECT_EQ(mm->ne[0], 3);
    EXPECT_EQ(mm->ne[1], 6);
    EXPECT_EQ(mm->ne[2], 2);
    EXPECT_EQ(mm->type, GGML_TYPE_F32);
    ggml_tensor * q = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 8, 5, 4);
    ggml_tensor * k = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F16, 8, 9, 2);
    ggml_tensor * v = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F16, 6, 9, 2);
    ggml_tensor * fa = ggml_flash_attn_ext(ctx.get(), q, k, v, nullptr, 0.5f, 0.0f, 0.0f);
    EXPECT_EQ(fa->ne[0], 6); // [Dv, n_head, n_q]
    EXPECT_EQ(fa->ne[1], 4);
    EXPECT_EQ(fa->ne[2], 5);
    float dims[2];
    ggml_rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, dims);
    EXPECT_LE(dims[0], dims[1]);
    EXPECT_GE(dims[0], 0.0f);
    EXPECT_LE(dims[1], 127.0f);
}

TEST(Core, GraphOrderLeafsAndNodes) {
    auto          ctx = make_ctx(1 << 20, true);
    ggml_tensor * x   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor * y   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_set_name(x, "x");
    ggml_tensor * s = ggml_add(ctx.get(), x, y);
    ggml_tensor * m = ggml_mul(ctx.get(), s, x);
    ggml_tensor * r = ggml_sqr(ctx.get(), m);
    ggml_set_name(r, "r");
    ggml_cgraph * g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, r);
    ggml_build_forward_expand(g, r); // adding twice changes nothing
    EXPECT_EQ(ggml_graph_n_nodes(g), 3);
    EXPECT_EQ(ggml_graph_node(g, 0), s);
    EXPECT_EQ(ggml_graph_node(g, 1), m);
    EXPECT_EQ(ggml_graph_node(g, -1), r);
    EXPECT_EQ(ggml_graph_get_tensor(g, "x"), x);
    EXPECT_EQ(ggml_graph_get_tensor(g, "r"), r);
    EXPECT_EQ(ggml_graph_size(g), GGML_DEFAULT_GRAPH_SIZE);
    ggml_cgraph view = ggml_graph_view(g, 1, 3);
    EXPECT_EQ(ggml_graph_n_nodes(&view), 2);
    EXPECT_EQ(ggml_graph_node(&view, 0), m);
    EXPECT_DEATH(ggml_graph_node(g, 3), "out of the graph");
}

// A tensor's use count as ggml's backends read it (ggml-impl.h,
// ggml_node_get_use_count): the graph's fields as ggml lays them out, ggml's
// hash of the pointer and linear probing; 0 for a tensor not in the set.
int32_t ggml_use_count(const ggml_cgraph * g, const ggml_tensor * t) {
    const size_t size = g->visited_hash_set.size;
    if (size == 0) {
        return 0;
    }
    auto   used = [&](size_t i) { return ((g->visited_hash_set.used[i / 32] >> (i % 32)) & 1u) != 0; };
    size_t i    = (reinterpret_cast<uintptr_t>(t) >> 4) % size;
    for (size_t n = 0; n < size && used(i) && g->visited_hash_set.keys[i] != t; ++n) {
        i = (i + 1) % size;
    }
    return used(i) && g->visited_hash_set.keys[i] == t ? g->use_counts[i] : 0;
}

// Use counts as ggml's ggml_build_forward_expand fills them: each node adds
// one use to each source it names (twice for a source named twice), counted
// once per node however often the node is reached or expanded.
TEST(Core, GraphUseCountsCountEachNodesSources) {
    auto          ctx = make_ctx(1 << 20, true);
    ggml_tensor * x   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor * w   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor * a   = ggml_add(ctx.get(), x, x);
    ggml_tensor * b   = ggml_mul(ctx.get(), a, w);
    ggml_tensor * c   = ggml_neg(ctx.get(), a);
    ggml_tensor * d   = ggml_add(ctx.get(), b, c);
    ggml_cgraph * g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, d);
    ggml_build_forward_expand(g, d);
    EXPECT_EQ(ggml_use_count(g, x), 2);
    EXPECT_EQ(ggml_use_count(g, w), 1);
    EXPECT_EQ(ggml_use_count(g, a), 2);
    EXPECT_EQ(ggml_use_count(g, b), 1);
    EXPECT_EQ(ggml_use_count(g, c), 1);
    EXPECT_EQ(ggml_use_count(g, d), 0);
    // A later root adds its uses to the nodes already there.
    ggml_tensor * e = ggml_scale(ctx.get(), b, 2.0f);
    ggml_build_forward_expand(g, e);
    EXPECT_EQ(ggml_use_count(g, b), 2);
    EXPECT_EQ(ggml_use_count(g, e), 0);
    EXPECT_EQ(ggml_use_count(g, d), 0);
    ASSERT_EQ(ggml_graph_n_nodes(g), 5);
    EXPECT_EQ(g->uid, 0u);

    // Copies keep every count; a cleared graph counts anew.
    ggml_cgraph * dup = ggml_graph_dup(ctx.get(), g, false);
    for (ggml_tensor * t : {x, w, a, b, c, d, e}) {
        EXPECT_EQ(ggml_use_count(dup, t), ggml_use_count(g, t)) << t->name;
    }
    ggml_graph_clear(dup);
    EXPECT_EQ(ggml_use_count(dup, a), 0);
    ggml_build_forward_expand(dup, c);
    EXPECT_EQ(ggml_use_count(dup, a), 1);
    EXPECT_EQ(ggml_use_count(dup, x), 2);
}

// ggml_graph_view shares the parent's hash set and use counts, so a node of
// the view used after its end keeps that use; a view has uid 0 and no leafs.
TEST(Core, GraphViewCarriesTheParentsUseCounts) {
    auto          ctx = make_ctx(1 << 20, true);
    ggml_tensor * x   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor * n   = ggml_rms_norm(ctx.get(), x, 1e-6f);
    ggml_tensor * m   = ggml_mul(ctx.get(), n, x);
    ggml_tensor * s   = ggml_add(ctx.get(), m, n); // n used after the view below
    ggml_cgraph * g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, s);
    g->uid = ggml_graph_next_uid();

    ggml_cgraph v = ggml_graph_view(g, 0, 2);
    ASSERT_EQ(ggml_graph_n_nodes(&v), 2);
    EXPECT_EQ(ggml_graph_node(&v, 0), n);
    EXPECT_EQ(v.use_counts, g->use_counts);
    EXPECT_EQ(v.visited_hash_set.keys, g->visited_hash_set.keys);
    EXPECT_EQ(v.visited_hash_set.used, g->visited_hash_set.used);
    EXPECT_EQ(v.visited_hash_set.size, g->visited_hash_set.size);
    EXPECT_EQ(ggml_use_count(&v, n), 2);
    EXPECT_EQ(ggml_use_count(&v, m), 1);
    EXPECT_EQ(ggml_use_count(&v, x), 2);
    EXPECT_EQ(v.uid, 0u);
    EXPECT_EQ(v.size, 0);
    EXPECT_EQ(v.n_leafs, 0);
    EXPECT_EQ(v.grads, nullptr);
    EXPECT_DEATH(ggml_build_forward_expand(&v, s), "graph views cannot be expanded");

    // A copy of a view holds the view's nodes with the parent's counts.
    ggml_cgraph * c = ggml_new_graph_custom(ctx.get(), 4, false);
    ggml_graph_cpy(&v, c);
    EXPECT_EQ(ggml_use_count(c, n), 2);
    EXPECT_EQ(ggml_use_count(c, m), 1);
    EXPECT_EQ(ggml_use_count(c, s), 0);
}

TEST(Core, GraphUidsAreNewAndNeverZero) {
    const uint64_t a = ggml_graph_next_uid();
    const uint64_t b = ggml_graph_next_uid();
    EXPECT_NE(a, 0u);
    EXPECT_NE(b, 0u);
    EXPECT_NE(a, b);
}

TEST(Core, GraphFullIsAClearError) {
    auto          ctx = make_ctx(1 << 20, true);
    ggml_cgraph * g   = ggml_new_graph_custom(ctx.get(), 4, false);
    ggml_tensor * t   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    for (int i = 0; i < 5; ++i) {
        t = ggml_neg(ctx.get(), t);
    }
    EXPECT_DEATH(ggml_build_forward_expand(g, t), "graph is full");
}

TEST(Core, GraphOverheadFitsAGraph) {
    auto ctx = make_ctx(ggml_graph_overhead_custom(100, false), true);
    EXPECT_NE(ggml_new_graph_custom(ctx.get(), 100, false), nullptr);
    auto ctx2 = make_ctx(ggml_graph_overhead(), true);
    EXPECT_NE(ggml_new_graph(ctx2.get()), nullptr);
}

TEST(Core, DeepChainDoesNotOverflowTheStack) {
    const int     n   = 100000;
    auto          ctx = make_ctx(size_t(n + 2) * ggml_tensor_overhead() + ggml_graph_overhead_custom(n + 1, false), true);
    ggml_tensor * t   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1);
    for (int i = 0; i < n; ++i) {
        t = ggml_neg(ctx.get(), t);
    }
    ggml_cgraph * g = ggml_new_graph_custom(ctx.get(), n + 1, false);
    ggml_build_forward_expand(g, t);
    EXPECT_EQ(ggml_graph_n_nodes(g), n);
}

TEST(Core, LogCallbackReceivesMessages) {
    std::vector<std::string> lines;
    ggml_log_set(
        [](ggml_log_level level, const char * text, void * ud) {
            if (level == GGML_LOG_LEVEL_INFO) static_cast<std::vector<std::string> *>(ud)->push_back(text);
        },
        &lines);
    auto          ctx = make_ctx(4 * ggml_tensor_overhead() + ggml_graph_overhead(), true);
    ggml_tensor * a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_cgraph * g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, ggml_neg(ctx.get(), a));
    ggml_graph_print(g);
    ggml_log_set(nullptr, nullptr);
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines[0].find("GRAPH"), std::string::npos);
}

// A file or function name longer than the message buffer neither overflows
// it nor hides the message after it.
TEST(Core, AbortWithALongFileNameKeepsTheMessage) {
    const std::string file = std::string(3000, 'd') + "/tail_of_the_name.cpp";
    EXPECT_DEATH(ggml_abort(file.c_str(), 7, "the message %d", 42), "tail_of_the_name.cpp:7: the message 42");
    EXPECT_DEATH(ggml_abort(file.c_str(), 0, "the message %d", 43), "tail_of_the_name.cpp: the message 43");
}

// The null pointer is a key like any other (an empty slot holds null).
TEST(Core, PtrMapTakesTheNullKey) {
    loom::PtrMap<int> m;
    EXPECT_EQ(m.find(nullptr), nullptr);
    m[nullptr] = 5;
    std::vector<int> keys(200);
    for (int & k : keys) {
        m[&k] = int(&k - keys.data()); // grows the map several times
    }
    ASSERT_NE(m.find(nullptr), nullptr);
    EXPECT_EQ(*m.find(nullptr), 5);
    EXPECT_EQ(m.size(), keys.size() + 1);
    for (const int & k : keys) {
        ASSERT_NE(m.find(&k), nullptr);
        EXPECT_EQ(*m.find(&k), int(&k - keys.data()));
    }
    size_t seen = 0, nulls = 0;
    m.for_each([&](const void * key, int) {
        ++seen;
        nulls += key == nullptr;
    });
    EXPECT_EQ(seen, keys.size() + 1);
    EXPECT_EQ(nulls, 1u);
    m.clear();
    EXPECT_EQ(m.size(), 0u);
    EXPECT_EQ(m.find(nullptr), nullptr);
    EXPECT_EQ(m.find(&keys[0]), nullptr);
    m[nullptr] += 2;
    EXPECT_EQ(*m.find(nullptr), 2);
}

TEST(Core, TimeIsMonotonic) {
    ggml_time_init();
    const int64_t a = ggml_time_us();
    const int64_t b = ggml_time_us();
    EXPECT_LE(a, b);
    EXPECT_STREQ(ggml_op_name(GGML_OP_MUL_MAT), "MUL_MAT");
    EXPECT_STREQ(ggml_unary_op_name(GGML_UNARY_OP_SILU), "SILU");
    EXPECT_STREQ(ggml_status_to_string(GGML_STATUS_ABORTED), "GGML status: warning (operation aborted)");
}

} // namespace
