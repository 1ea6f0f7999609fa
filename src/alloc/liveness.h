#pragma once

// Liveness analysis for the graph allocator.
//
// Walks a graph in execution order, as ggml's allocator does, and decides
// which tensors take memory from the allocator and for how long. The result
// is a list of blocks: a block is one region of memory, first written at
// step `start` and last read at step `end`, that one tensor or a chain of
// tensors computed in place on each other occupy. Where the blocks go in the
// buffer is decided afterwards, with the whole list known (planner.h).
//
// Steps: 0 is the prologue (leafs and graph inputs, which the caller fills
// before the computation starts), node i runs at step i + 1, and the last
// step (n_nodes + 1) stands for "after the computation" (outputs and
// anything never consumed stay live until then). A block is live on the
// closed range [start, end]; two blocks may share memory only when their
// ranges do not intersect. A node's memory is taken before its sources are
// released, so a node never overlaps a source it reads unless it was
// deliberately computed in place on it.
//
// Rules (see Note [In-place reuse] in liveness.cpp):
//   - tensors with data or a buffer are the caller's and are never touched;
//   - views take no memory and keep their source alive while they are;
//   - graph inputs (GGML_TENSOR_FLAG_INPUT) and leafs are allocated in the
//     prologue and released after their last consumer;
//   - graph outputs (GGML_TENSOR_FLAG_OUTPUT) are never released.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ggml-backend.h"
#include "tensor_ids.h"

namespace loom::alloc {

// Ops whose kernels may write their result over one of their sources
// (element-wise, or row-wise reading a row before writing it). ggml's list,
// restricted to the ops loom has.
bool op_can_inplace(ggml_op op);

// One distinct buffer type of an allocator; buffer ids that name the same
// buffer type share one pool (and one buffer).
struct PoolDesc {
    ggml_backend_buffer_type_t buft      = nullptr;
    size_t                     alignment = 1;
};

struct Block {
    int32_t pool  = 0;
    size_t  size  = 0; // bytes, rounded up to the pool's alignment
    int32_t start = 0;
    int32_t end   = 0;
};

// A tensor that was given the block of its source src[slot].
struct InplaceUse {
    int32_t tensor = 0; // id
    int32_t slot   = 0;
};

struct Liveness {
    int32_t                 n_steps = 0;
    std::vector<Block>      blocks;   // in the order they were first taken
    std::vector<int32_t>    block_of; // per tensor id; -1 when the allocator gives it no memory
    std::vector<InplaceUse> inplace;
};

// Where the caller wants each node and leaf (ggml_gallocr_reserve_n's ids);
// NULL arrays mean buffer 0 for everything.
struct BufferIds {
    const int *                  node_ids  = nullptr;
    const int *                  leaf_ids  = nullptr;
    int                          n_buffers = 1;
    const std::vector<int32_t> * pool_of   = nullptr; // buffer id -> pool
    const char *                 caller    = "ggml_gallocr_reserve_n"; // named when an id is out of range
};

// Fills out for graph. ids must have been built from graph. Aborts (naming
// the node) when a buffer id is out of range: a broken precondition.
void analyse_liveness(const ggml_cgraph & graph, const TensorIds & ids, const BufferIds & buffers,
                      const std::vector<PoolDesc> & pools, Liveness & out);

// A hash per node position and per leaf of everything the liveness depends
// on besides sizes: which tensors each node reads, flags, views. Two graphs
// with equal signatures (and tensors no larger) can reuse one plan.
void graph_signature(const ggml_cgraph & graph, const TensorIds & ids, std::vector<uint64_t> & out);

// Whether node may still be computed in place on src: same type, shape and
// strides, and (for a view) at the start of its source.
bool inplace_still_valid(const ggml_tensor * node, const ggml_tensor * src);

} // namespace loom::alloc
