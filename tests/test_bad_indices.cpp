// Indices read from data, outside their bound (Note [Index sources] in
// core/op_table.h, docs/errors.md): for every operator whose row names
// index sources, on the CPU, with one thread, several, and the portable
// kernels, an index one past the end, a negative one and a huge one each
// stop the computation with GGML_STATUS_FAILED and a logged message naming
// the operator, the node and the value; the node's memory and the node
// after it keep their bytes; and the same graph computes once the index is
// good again.

#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/op_table.h"
#include "log_capture.h"
#include "test_util.h"

using namespace loomtest;

namespace {

// One operator with an index source: build makes the node in ctx with good
// indices, sets *ids to its index source and *memory to the tensor whose
// bytes the node writes (the node, or what it is a view of).
struct Case {
    const char * what;
    ggml_op      op;
    int64_t      limit; // indices must lie in [0, limit)
    std::function<ggml_tensor *(ggml_context *, ggml_tensor ** ids, ggml_tensor ** memory)> build;
};

// Good indices 0, 1, ..., limit - 1, 0, ... through t's strides.
void fill_indices(ggml_tensor * t, int64_t limit) {
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0, ++k) {
                    char * p = static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                               i3 * t->nb[3];
                    if (t->type == GGML_TYPE_I64) {
                        const int64_t v = k % limit;
                        std::memcpy(p, &v, sizeof(v));
                    } else {
                        const auto v = int32_t(k % limit);
                        std::memcpy(p, &v, sizeof(v));
                    }
                }
            }
        }
    }
}

// Stores v as t's last element.
void set_last(ggml_tensor * t, int64_t v) {
    char * p = static_cast<char *>(t->data) + (t->ne[0] - 1) * t->nb[0] + (t->ne[1] - 1) * t->nb[1] +
               (t->ne[2] - 1) * t->nb[2] + (t->ne[3] - 1) * t->nb[3];
    if (t->type == GGML_TYPE_I64) {
        std::memcpy(p, &v, sizeof(v));
    } else {
        const auto w = int32_t(v);
        std::memcpy(p, &w, sizeof(w));
    }
}

std::vector<Case> cases() {
    std::vector<Case> c;
    c.push_back({"get_rows", GGML_OP_GET_ROWS, 7, [](ggml_context * ctx, ggml_tensor ** ids, ggml_tensor ** mem) {
                     std::mt19937  rng(1);
                     ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 7, 2);
                     fill_random(a, rng);
                     *ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 5, 2);
                     *mem = ggml_get_rows(ctx, a, *ids);
                     return *mem;
                 }});
    c.push_back({"get_rows_back", GGML_OP_GET_ROWS_BACK, 3,
                 [](ggml_context * ctx, ggml_tensor ** ids, ggml_tensor ** mem) {
                     std::mt19937  rng(2);
                     ggml_tensor * dy   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 5);
                     ggml_tensor * like = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
                     fill_random(dy, rng);
                     *ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 5);
                     *mem = ggml_get_rows_back(ctx, dy, *ids, like);
                     return *mem;
                 }});
    for (ggml_type t : {GGML_TYPE_I32, GGML_TYPE_I64}) {
        c.push_back({t == GGML_TYPE_I32 ? "set_rows i32" : "set_rows i64", GGML_OP_SET_ROWS, 9,
                     [t](ggml_context * ctx, ggml_tensor ** ids, ggml_tensor ** mem) {
                         std::mt19937  rng(3);
                         ggml_tensor * dst = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 5, 9, 2);
                         ggml_tensor * src = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 5, 4, 2);
                         fill_random(src, rng);
                         *ids = ggml_new_tensor_2d(ctx, t, 4, 2);
                         *mem = dst;
                         return ggml_set_rows(ctx, dst, src, *ids);
                     }});
    }
    c.push_back({"mul_mat_id", GGML_OP_MUL_MAT_ID, 3, [](ggml_context * ctx, ggml_tensor ** ids, ggml_tensor ** mem) {
                     std::mt19937  rng(4);
                     ggml_tensor * as = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 5, 3);
                     ggml_tensor * b  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 1, 4);
                     fill_random(as, rng);
                     fill_random(b, rng);
                     *ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 4);
                     *mem = ggml_mul_mat_id(ctx, as, b, *ids);
                     return *mem;
                 }});
    c.push_back({"add_id", GGML_OP_ADD_ID, 6, [](ggml_context * ctx, ggml_tensor ** ids, ggml_tensor ** mem) {
                     std::mt19937  rng(5);
                     ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 13, 4, 5);
                     ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 13, 6);
                     fill_random(a, rng);
                     fill_random(b, rng);
                     *ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 4, 5);
                     *mem = ggml_add_id(ctx, a, b, *ids);
                     return *mem;
                 }});
    c.push_back({"ssm_scan", GGML_OP_SSM_SCAN, 3, [](ggml_context * ctx, ggml_tensor ** ids, ggml_tensor ** mem) {
                     std::mt19937  rng(6);
                     // d_state 4, head_dim 3, 2 heads in 1 group, 2 tokens, 2 sequences, 3 states.
                     ggml_tensor * s  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 3, 2, 3);
                     ggml_tensor * x  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 2, 2, 2);
                     ggml_tensor * dt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 2, 2);
                     ggml_tensor * A  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 2);
                     ggml_tensor * B  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 1, 2, 2);
                     ggml_tensor * C  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 1, 2, 2);
                     for (ggml_tensor * t : {s, x, dt, B, C}) {
                         fill_random(t, rng);
                     }
                     fill_random(A, rng, -2.0, -0.1);
                     *ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
                     *mem = ggml_ssm_scan(ctx, s, x, dt, A, B, C, *ids, 1);
                     return *mem;
                 }});
    return c;
}

// The bad values for an index type: one past the end, negative, huge.
std::vector<int64_t> bad_values(ggml_type t, int64_t limit) {
    if (t == GGML_TYPE_I64) {
        return {limit, -1, INT64_MIN, int64_t(1) << 40, INT64_MAX};
    }
    return {limit, -1, INT32_MIN, INT32_MAX};
}

std::vector<uint8_t> bytes_of(const ggml_tensor * t) {
    const auto * p = static_cast<const uint8_t *>(t->data);
    return {p, p + ggml_nbytes(t)};
}

} // namespace

// Every operator of the table with index sources has a case here.
TEST(BadIndices, EveryOperatorWithIndexSourcesIsCovered) {
    const std::vector<Case> all = cases();
    int                     n   = 0;
    for (const loom::OpInfo & info : loom::k_ops) {
        if (info.indices.srcs == 0) {
            continue;
        }
        ++n;
        bool covered = false;
        for (const Case & c : all) {
            covered = covered || c.op == info.op;
        }
        EXPECT_TRUE(covered) << info.name << " has index sources and no case in this file";
    }
    EXPECT_GE(n, 6);
}

TEST(BadIndices, StopTheComputationAndWriteNothing) {
    int n_checked = 0;
    for (const Case & c : cases()) {
        for (const RunMode & mode : run_modes()) {
            Context       ctx;
            ggml_tensor * ids = nullptr;
            ggml_tensor * mem = nullptr;
            ggml_tensor * node = c.build(ctx, &ids, &mem);
            ASSERT_EQ(node->op, c.op) << c.what;
            ASSERT_NE(loom::index_srcs(c.op), 0) << c.what;
            ggml_set_name(node, "victim");
            ggml_tensor * next = ggml_scale(ctx, node, 2.0f);
            for (const int64_t bad : bad_values(ids->type, c.limit)) {
                const int64_t stored = ids->type == GGML_TYPE_I64 ? bad : int64_t(int32_t(bad));
                SCOPED_TRACE(std::string(c.what) + ", index " + std::to_string(stored) + ", " + describe(mode));
                fill_indices(ids, c.limit);
                set_last(ids, bad);
                std::memset(mem->data, 0x5a, ggml_nbytes(mem));
                std::memset(next->data, 0x3c, ggml_nbytes(next));
                const std::vector<uint8_t> mem_before  = bytes_of(mem);
                const std::vector<uint8_t> next_before = bytes_of(next);
                LogCapture log(true);
                EXPECT_EQ(compute(ctx, {next}, mode), GGML_STATUS_FAILED);
                char want[256];
                std::snprintf(want, sizeof(want), "%s 'victim': index %lld at [%lld, %lld, %lld, %lld]",
                              ggml_op_desc(node), (long long) stored, (long long) (ids->ne[0] - 1),
                              (long long) (ids->ne[1] - 1), (long long) (ids->ne[2] - 1), (long long) (ids->ne[3] - 1));
                EXPECT_TRUE(log.contains(want)) << "wanted \"" << want << "\" in:\n" << log.text();
                EXPECT_TRUE(log.contains("outside [0, " + std::to_string(c.limit) + ")")) << log.text();
                EXPECT_TRUE(bytes_of(mem) == mem_before) << "the node's memory was written";
                EXPECT_TRUE(bytes_of(next) == next_before) << "the node after it was computed";
                ++n_checked;
            }
            // Good indices again: the same graph computes, in the same process.
            fill_indices(ids, c.limit);
            std::memset(next->data, 0x3c, ggml_nbytes(next));
            const std::vector<uint8_t> next_before = bytes_of(next);
            EXPECT_EQ(compute(ctx, {next}, mode), GGML_STATUS_SUCCESS) << c.what;
            EXPECT_FALSE(bytes_of(next) == next_before) << c.what << ": nothing computed";
        }
    }
    EXPECT_GE(n_checked, 7 * 4);
}
