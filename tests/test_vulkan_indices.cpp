// Indices read from data on a Vulkan device (docs/errors.md, "Indices read
// from data"; Note [Indices from data] in src/backends/vulkan/backend.cpp).
// For GET_ROWS (I32 indices) and SET_ROWS (I32 and I64), an index one past
// the end, a negative one and a huge one (and for I64 one above 2^32), at
// the first, a middle and the last position: graph_compute returns
// GGML_STATUS_FAILED and logs the operator, the node, the value and its
// position; the node's memory and a later node's keep their bytes; a node
// before it was computed; and the same graph computes with good indices
// again. Index tensors computed by an earlier node of the same graph (a
// GET_ROWS of an I32 table) are checked as that node left them.
//
// Runs on whatever Vulkan device the registry has; CTest opts in to CPU
// devices such as Mesa's lavapipe with GGML_VK_VISIBLE_DEVICES. Without any
// device every test skips, saying why.

#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-vulkan.h"
#include "vulkan_test_util.h"
#include "log_capture.h"

using loomtest::LogCapture;

namespace {

ggml_context_ptr no_alloc_context(size_t n_tensors) {
    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * n_tensors + ggml_graph_overhead();
    params.no_alloc = true;
    return ggml_context_ptr(ggml_init(params));
}

std::vector<float> random_values(size_t n, unsigned seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    v(n);
    for (float & x : v) x = u(rng);
    return v;
}

std::vector<uint8_t> bytes_of(const ggml_tensor * t) {
    std::vector<uint8_t> b(ggml_nbytes(t));
    ggml_backend_tensor_get(t, b.data(), 0, b.size());
    return b;
}

std::vector<float> floats_of(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

// Stores the values of a contiguous I32 or I64 tensor, in memory order.
void set_indices(ggml_tensor * t, const std::vector<int64_t> & v) {
    ASSERT_EQ(int64_t(v.size()), ggml_nelements(t));
    if (t->type == GGML_TYPE_I64) {
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        return;
    }
    std::vector<int32_t> w(v.size());
    for (size_t i = 0; i < v.size(); ++i) w[i] = int32_t(v[i]);
    ggml_backend_tensor_set(t, w.data(), 0, ggml_nbytes(t));
}

// Values outside [0, limit): one past the end, negative, huge, and for I64
// one above 2^32 whose low word alone would be a good row.
std::vector<int64_t> bad_values(ggml_type type, int64_t limit) {
    std::vector<int64_t> v = {limit, -1, INT32_MAX};
    if (type == GGML_TYPE_I64) {
        v.push_back((int64_t(1) << 32) + 1);
    }
    return v;
}

// The first, a middle and the last position of n.
std::vector<size_t> positions(size_t n) {
    return {0, n / 2, n - 1};
}

// "[i0, i1, i2, i3]" of linear position pos in t.
std::string coords(const ggml_tensor * t, size_t pos) {
    int64_t at[4];
    auto    p = int64_t(pos);
    for (int d = 0; d < 4; ++d) {
        at[d] = p % t->ne[d];
        p /= t->ne[d];
    }
    char text[96];
    std::snprintf(text, sizeof(text), "[%lld, %lld, %lld, %lld]", (long long) at[0], (long long) at[1],
                  (long long) at[2], (long long) at[3]);
    return text;
}

// The start of the message the device logs for value at pos of src[1] of
// the node named node.
std::string message(ggml_backend_t be, const char * op, const char * node, int64_t value, const ggml_tensor * ids,
                    size_t pos) {
    return std::string(ggml_backend_name(be)) + ": " + op + " '" + node + "': index " + std::to_string(value) +
           " at " + coords(ids, pos) + " of src[1] ";
}

std::string outside(int64_t limit) {
    return "is outside [0, " + std::to_string(limit) + ")";
}

// ---- GET_ROWS ----------------------------------------------------------------

// pre = 2 a; out = get_rows(pre, ids); later = 3 out. a [8, 6, 2], ids [3, 2].
struct GetRowsGraph {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *a = nullptr, *ids = nullptr, *pre = nullptr, *out = nullptr, *later = nullptr;
    ggml_cgraph * gf = nullptr;
    std::vector<float> av;

    explicit GetRowsGraph(ggml_backend_t be) {
        ctx              = no_alloc_context(16);
        ggml_context * c = ctx.get();
        a                = ggml_new_tensor_3d(c, GGML_TYPE_F32, 8, 6, 2);
        ids              = ggml_new_tensor_2d(c, GGML_TYPE_I32, 3, 2);
        ggml_set_name(ids, "ids");
        pre = ggml_scale(c, a, 2.0f);
        out = ggml_get_rows(c, pre, ids);
        ggml_set_name(out, "victim");
        later = ggml_scale(c, out, 3.0f);
        gf    = ggml_new_graph(c);
        ggml_build_forward_expand(gf, later);
        buf.reset(ggml_backend_alloc_ctx_tensors(c, be));
        av = random_values(8 * 6 * 2, 3);
        if (buf) {
            ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
        }
    }

    // out and later as a naive get_rows computes them from ids.
    void expect_result(const std::vector<int64_t> & rows) const {
        const std::vector<float> got = floats_of(out), got_later = floats_of(later);
        for (int64_t j = 0; j < 2; ++j) {
            for (int64_t r = 0; r < 3; ++r) {
                for (int64_t k = 0; k < 8; ++k) {
                    const size_t o    = size_t(k + 8 * r + 24 * j);
                    const float  want = 2.0f * av[size_t(k + 8 * rows[size_t(r + 3 * j)] + 48 * j)];
                    EXPECT_EQ(got[o], want) << "out[" << k << ", " << r << ", " << j << "]";
                    EXPECT_FLOAT_EQ(got_later[o], 3.0f * want) << "later[" << k << ", " << r << ", " << j << "]";
                }
            }
        }
    }
};

TEST(VulkanIndices, GetRowsStopsBeforeWritingAnything) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ASSERT_TRUE(vk);
    GetRowsGraph g(vk.get());
    ASSERT_TRUE(g.buf);
    const std::vector<int64_t> good = {5, 0, 3, 2, 4, 1};
    int                        cases = 0;
    for (const int64_t bad : bad_values(GGML_TYPE_I32, 6)) {
        for (const size_t pos : positions(good.size())) {
            SCOPED_TRACE("index " + std::to_string(bad) + " at " + std::to_string(pos));
            std::vector<int64_t> rows = good;
            rows[pos]                 = bad;
            set_indices(g.ids, rows);
            ggml_backend_tensor_memset(g.pre, 0x11, 0, ggml_nbytes(g.pre));
            ggml_backend_tensor_memset(g.out, 0xa5, 0, ggml_nbytes(g.out));
            ggml_backend_tensor_memset(g.later, 0x5a, 0, ggml_nbytes(g.later));
            const std::vector<uint8_t> out_before = bytes_of(g.out), later_before = bytes_of(g.later);
            {
                LogCapture log(true);
                EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_FAILED);
                const std::string want = message(vk.get(), "GET_ROWS", "victim", bad, g.ids, pos);
                EXPECT_TRUE(log.contains(want) && log.contains(outside(6))) << "wanted \"" << want << "\" in:\n"
                                                                             << log.text();
            }
            EXPECT_TRUE(bytes_of(g.out) == out_before) << "the node's memory was written";
            EXPECT_TRUE(bytes_of(g.later) == later_before) << "the node after it was computed";
            const std::vector<float> pre = floats_of(g.pre);
            for (size_t i = 0; i < pre.size(); ++i) {
                ASSERT_EQ(pre[i], 2.0f * g.av[i]) << "the node before it was not computed, element " << i;
            }
            // Good indices again: the same graph computes.
            set_indices(g.ids, good);
            EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_SUCCESS);
            g.expect_result(good);
            ++cases;
        }
    }
    EXPECT_EQ(cases, 9);
}

// ---- SET_ROWS ----------------------------------------------------------------

// pre = 2 rows; out = set_rows(dst, pre, ids); later = 3 out. rows [8, 3, 2],
// ids [3, 2] (I32 or I64), dst [8, 5, 2].
struct SetRowsGraph {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *rows = nullptr, *ids = nullptr, *dst = nullptr, *pre = nullptr, *out = nullptr, *later = nullptr;
    ggml_cgraph * gf = nullptr;
    std::vector<float> rv;

    SetRowsGraph(ggml_backend_t be, ggml_type index_type) {
        ctx              = no_alloc_context(16);
        ggml_context * c = ctx.get();
        rows             = ggml_new_tensor_3d(c, GGML_TYPE_F32, 8, 3, 2);
        ids              = ggml_new_tensor_2d(c, index_type, 3, 2);
        ggml_set_name(ids, "ids");
        dst = ggml_new_tensor_3d(c, GGML_TYPE_F32, 8, 5, 2);
        pre = ggml_scale(c, rows, 2.0f);
        out = ggml_set_rows(c, dst, pre, ids);
        ggml_set_name(out, "victim");
        later = ggml_scale(c, out, 3.0f);
        gf    = ggml_new_graph(c);
        ggml_build_forward_expand(gf, later);
        buf.reset(ggml_backend_alloc_ctx_tensors(c, be));
        rv = random_values(8 * 3 * 2, 5);
        if (buf) {
            ggml_backend_tensor_set(rows, rv.data(), 0, ggml_nbytes(rows));
        }
    }

    // dst (which held before) and later as a naive set_rows computes them.
    void expect_result(const std::vector<uint8_t> & before, const std::vector<int64_t> & at) const {
        std::vector<float> want(before.size() / sizeof(float));
        std::memcpy(want.data(), before.data(), before.size());
        for (int64_t j = 0; j < 2; ++j) {
            for (int64_t r = 0; r < 3; ++r) {
                for (int64_t k = 0; k < 8; ++k) {
                    want[size_t(k + 8 * at[size_t(r + 3 * j)] + 40 * j)] = 2.0f * rv[size_t(k + 8 * r + 24 * j)];
                }
            }
        }
        std::vector<uint8_t> want_bytes(before.size());
        std::memcpy(want_bytes.data(), want.data(), want_bytes.size());
        EXPECT_TRUE(bytes_of(dst) == want_bytes) << "dst differs from the reference";
        const std::vector<float> got_later = floats_of(later);
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_FLOAT_EQ(got_later[i], 3.0f * want[i]) << "later, element " << i;
        }
    }
};

TEST(VulkanIndices, SetRowsStopsBeforeWritingAnything) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ASSERT_TRUE(vk);
    int cases = 0;
    for (const ggml_type type : {GGML_TYPE_I32, GGML_TYPE_I64}) {
        SetRowsGraph g(vk.get(), type);
        ASSERT_TRUE(g.buf);
        const std::vector<int64_t> good = {4, 0, 2, 1, 3, 0};
        for (const int64_t bad : bad_values(type, 5)) {
            for (const size_t pos : positions(good.size())) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + " index " + std::to_string(bad) + " at " +
                             std::to_string(pos));
                std::vector<int64_t> at = good;
                at[pos]                 = bad;
                set_indices(g.ids, at);
                ggml_backend_tensor_memset(g.pre, 0x11, 0, ggml_nbytes(g.pre));
                ggml_backend_tensor_memset(g.dst, 0xa5, 0, ggml_nbytes(g.dst));
                ggml_backend_tensor_memset(g.later, 0x5a, 0, ggml_nbytes(g.later));
                const std::vector<uint8_t> dst_before = bytes_of(g.dst), later_before = bytes_of(g.later);
                {
                    LogCapture log(true);
                    EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_FAILED);
                    const std::string want = message(vk.get(), "SET_ROWS", "victim", bad, g.ids, pos);
                    EXPECT_TRUE(log.contains(want) && log.contains(outside(5))) << "wanted \"" << want << "\" in:\n"
                                                                                 << log.text();
                }
                EXPECT_TRUE(bytes_of(g.dst) == dst_before) << "the node's memory was written";
                EXPECT_TRUE(bytes_of(g.later) == later_before) << "the node after it was computed";
                const std::vector<float> pre = floats_of(g.pre);
                for (size_t i = 0; i < pre.size(); ++i) {
                    ASSERT_EQ(pre[i], 2.0f * g.rv[i]) << "the node before it was not computed, element " << i;
                }
                set_indices(g.ids, good);
                EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_SUCCESS);
                g.expect_result(dst_before, good);
                ++cases;
            }
        }
    }
    EXPECT_EQ(cases, 9 + 12);
}

// ---- indices computed by the graph ---------------------------------------------

// picked = get_rows(table, sel) (I32 [1, 4]), read as the indices of a
// GET_ROWS or a SET_ROWS: out = get_rows(a, picked) with a [8, 6], or
// out = set_rows(dst, rows, picked) with rows [8, 4], dst [8, 6]; later =
// 3 out.
struct ComputedGraph {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *table = nullptr, *sel = nullptr, *picked = nullptr, *ids = nullptr, *data = nullptr,
                *dst = nullptr, *out = nullptr, *later = nullptr;
    ggml_cgraph * gf = nullptr;
    std::vector<float> dv;

    ComputedGraph(ggml_backend_t be, ggml_op op) {
        ctx              = no_alloc_context(16);
        ggml_context * c = ctx.get();
        table            = ggml_new_tensor_2d(c, GGML_TYPE_I32, 1, 10);
        sel              = ggml_new_tensor_1d(c, GGML_TYPE_I32, 4);
        ggml_set_name(sel, "sel");
        picked = ggml_get_rows(c, table, sel);
        ggml_set_name(picked, "picked");
        ids = ggml_reshape_1d(c, picked, 4);
        ggml_set_name(ids, "ids");
        if (op == GGML_OP_GET_ROWS) {
            data = ggml_new_tensor_2d(c, GGML_TYPE_F32, 8, 6);
            out  = ggml_get_rows(c, data, ids);
        } else {
            data = ggml_new_tensor_2d(c, GGML_TYPE_F32, 8, 4);
            dst  = ggml_new_tensor_2d(c, GGML_TYPE_F32, 8, 6);
            out  = ggml_set_rows(c, dst, data, ids);
        }
        ggml_set_name(out, "victim");
        later = ggml_scale(c, out, 3.0f);
        gf    = ggml_new_graph(c);
        ggml_build_forward_expand(gf, later);
        buf.reset(ggml_backend_alloc_ctx_tensors(c, be));
        dv = random_values(size_t(ggml_nelements(data)), 7);
        if (buf) {
            ggml_backend_tensor_set(data, dv.data(), 0, ggml_nbytes(data));
        }
    }

    // The memory out writes.
    ggml_tensor * memory() const { return dst != nullptr ? dst : out; }

    void expect_result(const std::vector<uint8_t> & before, const std::vector<int64_t> & rows) const {
        std::vector<float> want(before.size() / sizeof(float));
        std::memcpy(want.data(), before.data(), before.size());
        for (int64_t r = 0; r < 4; ++r) {
            for (int64_t k = 0; k < 8; ++k) {
                if (dst == nullptr) {
                    want[size_t(k + 8 * r)] = dv[size_t(k + 8 * rows[size_t(r)])];
                } else {
                    want[size_t(k + 8 * rows[size_t(r)])] = dv[size_t(k + 8 * r)];
                }
            }
        }
        EXPECT_EQ(floats_of(memory()), want);
        const std::vector<float> got_later = floats_of(later);
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_FLOAT_EQ(got_later[i], 3.0f * want[i]) << "later, element " << i;
        }
    }
};

TEST(VulkanIndices, IndicesComputedByAnEarlierNode) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ASSERT_TRUE(vk);
    int cases = 0;
    for (const ggml_op op : {GGML_OP_GET_ROWS, GGML_OP_SET_ROWS}) {
        ComputedGraph g(vk.get(), op);
        ASSERT_TRUE(g.buf);
        if (!ggml_backend_supports_op(vk.get(), g.picked) || !ggml_backend_supports_op(vk.get(), g.out)) {
            GTEST_SKIP() << "the device cannot compute an I32 GET_ROWS or " << ggml_op_desc(g.out);
        }
        const char *               name = ggml_op_desc(g.out);
        const std::vector<int64_t> sel  = {7, 2, 9, 4};
        // table[sel[r]] = rows[r]: distinct rows of [0, 6).
        const std::vector<int64_t> rows = {5, 1, 3, 0};
        std::vector<int64_t>       table(10, 2);
        for (size_t r = 0; r < 4; ++r) table[size_t(sel[r])] = rows[r];
        set_indices(g.sel, sel);
        for (const int64_t bad : bad_values(GGML_TYPE_I32, 6)) {
            for (const size_t pos : positions(4)) {
                SCOPED_TRACE(std::string(name) + ": computed index " + std::to_string(bad) + " at " +
                             std::to_string(pos));
                std::vector<int64_t> t = table;
                t[size_t(sel[pos])]    = bad;
                set_indices(g.table, t);
                // A check that read picked before its node wrote it would
                // find only good indices (zeros).
                ggml_backend_tensor_memset(g.picked, 0, 0, ggml_nbytes(g.picked));
                ggml_backend_tensor_memset(g.memory(), 0xa5, 0, ggml_nbytes(g.memory()));
                ggml_backend_tensor_memset(g.later, 0x5a, 0, ggml_nbytes(g.later));
                const std::vector<uint8_t> mem_before = bytes_of(g.memory()), later_before = bytes_of(g.later);
                {
                    LogCapture log(true);
                    EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_FAILED);
                    const std::string want = message(vk.get(), name, "victim", bad, g.ids, pos);
                    EXPECT_TRUE(log.contains(want) && log.contains(outside(6))) << "wanted \"" << want << "\" in:\n"
                                                                                 << log.text();
                }
                EXPECT_TRUE(bytes_of(g.memory()) == mem_before) << "the node's memory was written";
                EXPECT_TRUE(bytes_of(g.later) == later_before) << "the node after it was computed";
                std::vector<int32_t> picked(4);
                ggml_backend_tensor_get(g.picked, picked.data(), 0, ggml_nbytes(g.picked));
                for (size_t r = 0; r < 4; ++r) {
                    EXPECT_EQ(picked[r], int32_t(t[size_t(sel[r])])) << "picked (the node before) at " << r;
                }
                ++cases;
            }
        }
        // A bad index of the first node stops the graph there.
        {
            std::vector<int64_t> bad_sel = sel;
            bad_sel[3]                   = 10;
            set_indices(g.sel, bad_sel);
            set_indices(g.table, table);
            ggml_backend_tensor_memset(g.picked, 0x3c, 0, ggml_nbytes(g.picked));
            const std::vector<uint8_t> picked_before = bytes_of(g.picked), mem_before = bytes_of(g.memory());
            LogCapture                 log(true);
            EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_FAILED);
            const std::string want = message(vk.get(), "GET_ROWS", "picked", 10, g.sel, 3);
            EXPECT_TRUE(log.contains(want) && log.contains(outside(10))) << "wanted \"" << want << "\" in:\n"
                                                                          << log.text();
            EXPECT_FALSE(log.contains("victim")) << log.text();
            EXPECT_TRUE(bytes_of(g.picked) == picked_before) << "picked was written";
            EXPECT_TRUE(bytes_of(g.memory()) == mem_before) << "the node after picked was computed";
            set_indices(g.sel, sel);
            ++cases;
        }
        // Good computed indices over stale bad bytes (-1 in every word): the
        // check sees what the earlier node wrote.
        set_indices(g.table, table);
        ggml_backend_tensor_memset(g.picked, 0xff, 0, ggml_nbytes(g.picked));
        ggml_backend_tensor_memset(g.memory(), 0xa5, 0, ggml_nbytes(g.memory()));
        const std::vector<uint8_t> before = bytes_of(g.memory());
        EXPECT_EQ(ggml_backend_graph_compute(vk.get(), g.gf), GGML_STATUS_SUCCESS) << name;
        g.expect_result(before, rows);
        ++cases;
    }
    EXPECT_EQ(cases, 2 * (9 + 2));
}

// Several index nodes in a graph, as a model's KV cache writes: the second
// of two SET_ROWS reads a bad index, so the first (and what came before
// it) computed, and the second and everything after it did not.
TEST(VulkanIndices, SecondIndexNodeOfAGraph) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ASSERT_TRUE(vk);
    ggml_context_ptr ctx   = no_alloc_context(16);
    ggml_context *   c     = ctx.get();
    ggml_tensor *    k     = ggml_new_tensor_2d(c, GGML_TYPE_F32, 16, 2);
    ggml_tensor *    kc    = ggml_new_tensor_2d(c, GGML_TYPE_F16, 16, 8);
    ggml_tensor *    vc    = ggml_new_tensor_2d(c, GGML_TYPE_F16, 16, 8);
    ggml_tensor *    k_pos = ggml_new_tensor_1d(c, GGML_TYPE_I64, 2);
    ggml_tensor *    v_pos = ggml_new_tensor_1d(c, GGML_TYPE_I64, 2);
    ggml_set_name(v_pos, "v_pos");
    ggml_tensor * kw = ggml_set_rows(c, kc, ggml_scale(c, k, 2.0f), k_pos);
    ggml_tensor * vw = ggml_set_rows(c, vc, ggml_scale(c, k, 3.0f), v_pos);
    ggml_set_name(kw, "k_write");
    ggml_set_name(vw, "v_write");
    ggml_tensor * after = ggml_scale(c, ggml_add(c, kw, vw), 0.5f);
    ggml_cgraph * gf    = ggml_new_graph(c);
    ggml_build_forward_expand(gf, kw);
    ggml_build_forward_expand(gf, vw);
    ggml_build_forward_expand(gf, after);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(c, vk.get()));
    ASSERT_TRUE(buf);
    const std::vector<float> kv = random_values(32, 9);
    ggml_backend_tensor_set(k, kv.data(), 0, ggml_nbytes(k));
    const int64_t good[2] = {3, 7}, bad[2] = {3, 8};
    ggml_backend_tensor_set(k_pos, good, 0, sizeof(good));
    ggml_backend_tensor_set(v_pos, bad, 0, sizeof(bad));
    ggml_backend_tensor_memset(kc, 0xa5, 0, ggml_nbytes(kc));
    ggml_backend_tensor_memset(vc, 0xa5, 0, ggml_nbytes(vc));
    ggml_backend_tensor_memset(after, 0x5a, 0, ggml_nbytes(after));
    const std::vector<uint8_t> kc_before = bytes_of(kc), vc_before = bytes_of(vc), after_before = bytes_of(after);

    // The fp16 rows of a cache at good after a good write of scale * k.
    auto expect_rows = [&](const ggml_tensor * cache, float scale) {
        std::vector<ggml_fp16_t> h(16 * 8);
        ggml_backend_tensor_get(cache, h.data(), 0, ggml_nbytes(cache));
        for (int r = 0; r < 2; ++r) {
            for (int i = 0; i < 16; ++i) {
                const float want = ggml_fp16_to_fp32(ggml_fp32_to_fp16(scale * kv[size_t(r * 16 + i)]));
                EXPECT_EQ(ggml_fp16_to_fp32(h[size_t(good[r] * 16 + i)]), want) << "row " << r << ", " << i;
            }
        }
    };
    int cases = 0;
    {
        LogCapture log(true);
        EXPECT_EQ(ggml_backend_graph_compute(vk.get(), gf), GGML_STATUS_FAILED);
        const std::string want = message(vk.get(), "SET_ROWS", "v_write", 8, v_pos, 1);
        EXPECT_TRUE(log.contains(want) && log.contains(outside(8))) << "wanted \"" << want << "\" in:\n" << log.text();
        EXPECT_FALSE(log.contains("k_write")) << log.text();
        // The whole line, as docs/errors.md quotes it.
        EXPECT_TRUE(log.contains(std::string(ggml_backend_name(vk.get())) +
                                 ": SET_ROWS 'v_write': index 8 at [1, 0, 0, 0] of src[1] 'v_pos' [2, 1, 1, 1] i64 "
                                 "is outside [0, 8)\n"))
            << log.text();
        ++cases;
    }
    // Both bad (their sources are checked in one dispatch at the start): the
    // first node in the graph's order is named, and neither cache written.
    {
        ggml_backend_tensor_set(k_pos, bad, 0, sizeof(bad));
        const std::vector<uint8_t> kc_now = bytes_of(kc);
        LogCapture                 log(true);
        EXPECT_EQ(ggml_backend_graph_compute(vk.get(), gf), GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("SET_ROWS 'k_write': index 8 at [1, 0, 0, 0]")) << log.text();
        EXPECT_FALSE(log.contains("v_write")) << log.text();
        EXPECT_TRUE(bytes_of(kc) == kc_now) << "the first SET_ROWS wrote";
        EXPECT_TRUE(bytes_of(vc) == vc_before) << "the second SET_ROWS wrote";
        ggml_backend_tensor_set(k_pos, good, 0, sizeof(good));
        ++cases;
    }
    EXPECT_FALSE(bytes_of(kc) == kc_before) << "the first SET_ROWS did not compute";
    expect_rows(kc, 2.0f);
    EXPECT_TRUE(bytes_of(vc) == vc_before) << "the second SET_ROWS wrote";
    EXPECT_TRUE(bytes_of(after) == after_before) << "the node after it was computed";
    // Good indices: both caches written, the sum after them computed.
    ggml_backend_tensor_set(v_pos, good, 0, sizeof(good));
    EXPECT_EQ(ggml_backend_graph_compute(vk.get(), gf), GGML_STATUS_SUCCESS);
    expect_rows(kc, 2.0f);
    expect_rows(vc, 3.0f);
    EXPECT_FALSE(bytes_of(after) == after_before) << "the node after them was not computed";
    ++cases;
    EXPECT_EQ(cases, 3);
}

} // namespace
