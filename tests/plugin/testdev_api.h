#pragma once

// The test device: a backend plugin (libloom-testdev.so) for tests only,
// loaded with ggml_backend_load and never registered by default.
//
// Its reg "TestDev" has two devices, "TestDev0" and "TestDev1", of type GPU.
// Their buffers are not host memory: the base address is fake and every
// access goes through the buffer interface. A backend is an asynchronous
// stream with events; it computes the ops it supports with loom's CPU
// kernels on the device's memory.
//
// Configuration, per device, through
//   auto configure = (loom_testdev_configure_t)
//       ggml_backend_reg_get_proc_address(reg, "loom_testdev_configure");
// keys and values:
//   "ops"             ops supported: a comma-separated list of names as
//                     ggml_op_desc prints them ("ADD,MUL_MAT,SILU"), "UNARY"
//                     for every unary op, "*" for every op the CPU computes
//                     (the default), "" for none
//   "offload_ops"     ops the device asks to take over (offload_op), same
//                     syntax; default none
//   "max_buffer_size" largest buffer in bytes, "0" for no limit (the default)
//   "memory"          device memory in bytes (default 1 GiB); allocations
//                     beyond what is free fail
//   "extra"           "1": buffers of the device set the extra field of each
//                     tensor (not view) they initialise to the device's
//                     handle; "0" (the default): they leave it
//   "comm"            "1": the reg offers the meta backend's collective
//                     operations (ggml_backend_comm_init, _free,
//                     _allreduce_tensor, summing F32 tensors through the host);
//                     "0" (the default): it does not. For both devices.
//   "reset"           any value: every setting back to its default
// Returns false (logged) for an unknown device, key or a malformed value.
//
// (size_t (*)(void)) ggml_backend_reg_get_proc_address(reg, "loom_testdev_comm_allreduces")
// counts the all-reduces done by the collective operations.
//
// (size_t (*)(void)) ggml_backend_reg_get_proc_address(reg, "loom_testdev_init_tensors")
// counts the tensors (not views) that buffers of either device initialised
// (init_tensor zeroes a tensor's padding, the bytes from ggml_nbytes up to
// the buffer type's alloc_size).

// (loom_testdev_last_graph_t) ggml_backend_reg_get_proc_address(reg, "loom_testdev_last_graph")
// describes the last graph a backend of the device was given to compute:
// returns its number of nodes and fills *uid and, for up to capacity nodes,
// the node and its use count as ggml's backends read it (the graph's hash
// set and use_counts; 0 for a node not in the set). Returns 0 before any.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef bool (*loom_testdev_configure_t)(ggml_backend_dev_t dev, const char * key, const char * value);
typedef size_t (*loom_testdev_last_graph_t)(ggml_backend_dev_t dev, uint64_t * uid, struct ggml_tensor ** nodes,
                                            int32_t * use_counts, size_t capacity);

#ifdef __cplusplus
}
#endif
