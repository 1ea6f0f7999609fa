#pragma once

// The CPU kernels, grouped by op family. Every compute_* function is called
// by all nth threads of a graph computation with the same dst; each thread
// does its share (params.ith of params.nth) and the kernel returns when its
// share is done. A kernel that needs all threads to finish a phase before
// the next calls params.sync() (every thread must make the same calls).
//
// Results must not depend on nth: each output element is computed by one
// thread with the same sequence of operations whatever the thread count.
// Kernels never allocate; scratch memory comes from params.wdata, sized by
// the operator's work_size function (shared by all threads).
//
// Indices read from data (the index sources of an operator's row, Note
// [Index sources] in core/op_table.h) are checked before the kernel runs
// (compute.cpp): a kernel trusts them. A kernel that finds its data
// unusable otherwise logs why, calls params.fail() and returns without
// writing dst; the graph computation stops after that node and returns
// GGML_STATUS_FAILED.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace loom::cpu {

class Barrier;

struct ComputeParams {
    int       ith   = 0;
    int       nth   = 1;
    void *    wdata = nullptr; // shared scratch of wsize bytes
    size_t    wsize = 0;
    Barrier * barrier = nullptr;
    bool      use_ref = false; // portable code paths only
    int                node      = 0;       // index in the graph of the node being computed
    std::atomic<int> * failed_at = nullptr; // the first failed node (fail()), read after its barrier

    // Marks the node as failed (any thread may call it, any number of times).
    void fail() const {
        if (failed_at != nullptr) {
            int cur = failed_at->load(std::memory_order_relaxed);
            while (node < cur && !failed_at->compare_exchange_weak(cur, node, std::memory_order_relaxed)) {
            }
        }
    }

    // Waits until every thread of the computation has called sync.
    void sync() const;
};

// Rows [begin, end) of n for thread ith of nth (contiguous, balanced).
struct Range {
    int64_t begin;
    int64_t end;
};
inline Range split_range(int64_t n, int ith, int nth) {
    const int64_t per = (n + nth - 1) / nth;
    const int64_t b   = per * ith < n ? per * ith : n;
    const int64_t e   = b + per < n ? b + per : n;
    return {b, e};
}

// How the CPU computes one operator (kernels/op_kernels.cpp builds the table).
// compute is null for operators the CPU does not have; supports says which
// types and layouts the kernel takes; work_size (null: none) the scratch
// bytes shared by n_threads.
struct OpKernel {
    void (*compute)(const ComputeParams & p, ggml_tensor * dst)        = nullptr;
    bool (*supports)(const ggml_tensor * op)                            = nullptr;
    size_t (*work_size)(const ggml_tensor * op, int n_threads)          = nullptr;
};
using OpKernels = std::array<OpKernel, GGML_OP_COUNT>;
const OpKernel & op_kernel(ggml_op op);

// Each family of kernels fills the rows of its operators: one compute
// function per operator (operators that share their code share a template
// or a helper parameterised by what differs, never a second switch on
// dst->op), with the supports and work_size functions that go with it.
void add_binary_kernels(OpKernels & t);    // ADD, SUB, MUL, DIV (src1 broadcast to src0), ADD1 (binary.cpp)
void add_unary_kernels(OpKernels & t);     // SQR, SQRT, LOG, SIN, COS, SCALE, UNARY, GLU (unary.cpp)
void add_reduce_kernels(OpKernels & t);    // SUM, SUM_ROWS, MEAN, ARGMAX (reduce.cpp)
void add_copy_kernels(OpKernels & t);      // DUP, CPY, CONT, REPEAT, CONCAT, GET_ROWS, SET_ROWS (copy.cpp)
void add_norm_kernels(OpKernels & t);      // NORM, RMS_NORM, GROUP_NORM (norm.cpp)
void add_softmax_kernels(OpKernels & t);   // SOFT_MAX, DIAG_MASK_INF, DIAG_MASK_ZERO (softmax.cpp)
void add_rope_kernels(OpKernels & t);      // ROPE, ROPE_BACK (rope.cpp)
void add_sort_kernels(OpKernels & t);      // ARGSORT, TOP_K (sort.cpp)
void add_matmul_kernels(OpKernels & t);    // MUL_MAT, OUT_PROD (matmul.cpp)
void add_matmul_id_kernels(OpKernels & t); // MUL_MAT_ID (matmul_id.cpp)
void add_attention_kernels(OpKernels & t); // FLASH_ATTN_EXT (attention.cpp)
// Convolutions (conv.cpp); pooling, resampling, SAM's window and relative-position operators (pool.cpp).
void add_conv_kernels(OpKernels & t);
// CLAMP, LEAKY_RELU, FILL, ARANGE, TRI, CUMSUM, COUNT_EQUAL, L2_NORM, DIAG, TIMESTEP_EMBEDDING (fill.cpp).
void add_fill_kernels(OpKernels & t);
void add_layout_kernels(OpKernels & t);    // ACC, SET, REPEAT_BACK, ADD_ID, ROLL, PAD, PAD_REFLECT_1D (layout.cpp)
void add_ssm_kernels(OpKernels & t);       // SSM_CONV, SSM_SCAN (ssm.cpp)
void add_recurrent_kernels(OpKernels & t); // RWKV_WKV6/7, GATED_LINEAR_ATTN, GATED_DELTA_NET, SOLVE_TRI (recurrent.cpp)
void add_dsv4_kernels(OpKernels & t);      // LIGHTNING_INDEXER, DSV4_HC_COMB/PRE/POST (dsv4.cpp)
void add_train_kernels(OpKernels & t);     // CROSS_ENTROPY_LOSS(_BACK), OPT_STEP_ADAMW/SGD (train.cpp)
void add_backward_kernels(OpKernels & t);  // SILU/RMS_NORM/SOFT_MAX/GET_ROWS/POOL_2D/IM2COL_BACK (backward.cpp)

// MUL_MAT's row, which mul_mat_id's grouped path also runs (on a node of
// its own per expert, kernels/matmul_id.cpp).
void   compute_mul_mat(const ComputeParams & p, ggml_tensor * dst);
bool   supports_mul_mat(const ggml_tensor * op);
size_t work_size_mul_mat(const ggml_tensor * op, int n_threads);

// Matrix products that read the same b, computed as one node (Note
// [Products sharing a column] in matmul.cpp): at most MAX_PRODUCT_GROUP,
// each one for which matmul_joins_group holds; not on the reference path.
constexpr int MAX_PRODUCT_GROUP = 4;
bool          matmul_joins_group(const ggml_tensor * op);
size_t        work_size_products(ggml_tensor * const * nodes, int n, int n_threads);
void          compute_products(const ComputeParams & p, ggml_tensor * const * nodes, int n);

} // namespace loom::cpu
