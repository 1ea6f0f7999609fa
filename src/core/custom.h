#pragma once

// Note [Custom ops]
// GGML_OP_MAP_CUSTOM1..3 and GGML_OP_CUSTOM run a function of the caller's
// as a node. The node's op params hold a CustomOpParams: the function (its
// type given by the op), how many threads may call it, and the caller's
// userdata, as ggml keeps them. Only the CPU backend runs such a node: the
// function is a pointer into this process, so a node that names one is
// never accepted from the network (RPC) nor sent there. The CPU backend
// calls it on min(n_tasks, threads) threads (all of them for
// GGML_N_TASKS_MAX), each with its own ith and nth = that count, between
// the barriers of the nodes before and after it, like any kernel.

#include "ggml.h"

namespace loom {

struct CustomOpParams {
    union {
        ggml_custom1_op_t f1;
        ggml_custom2_op_t f2;
        ggml_custom3_op_t f3;
        ggml_custom_op_t  f;
    } fn;
    int    n_tasks;
    void * userdata;
};
static_assert(sizeof(CustomOpParams) <= GGML_MAX_OP_PARAMS, "custom op params fit a node's op params");

inline bool is_custom_op(ggml_op op) {
    return op == GGML_OP_MAP_CUSTOM1 || op == GGML_OP_MAP_CUSTOM2 || op == GGML_OP_MAP_CUSTOM3 ||
           op == GGML_OP_CUSTOM;
}

} // namespace loom
