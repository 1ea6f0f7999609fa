#pragma once

// loom: the multi-backend scheduler of the ggml C API (included by
// ggml-backend.h; ggml declares these in that header).
//
// Backends are given in priority order; the last one must be a CPU device.
// The scheduler places every node of a graph on a backend, cuts the graph
// into splits of consecutive nodes on one backend, copies the inputs of
// each split to its backend, plans the compute memory with the graph
// allocator, and runs the splits.
//
// Typical use:
//   sched = ggml_backend_sched_new(backends, NULL, n, GGML_DEFAULT_GRAPH_SIZE, false, true);
//   ggml_backend_sched_reserve(sched, worst_case_graph);   // optional
//   for each graph: ggml_backend_sched_reset(sched); build it; pin nodes with
//     ggml_backend_sched_set_tensor_backend; ggml_backend_sched_alloc_graph;
//     set inputs; ggml_backend_sched_graph_compute; read outputs.
//
// The user's graph is never rewired: the scheduler computes its own clones
// of the nodes and gives each user tensor the memory planned for it.
// Environment: GGML_SCHED_DEBUG=1 prints the splits, =2 also every node's
// placement and its cause; LOOM_SCHED_TRACE=FILE writes a Chrome trace;
// LOOM_SCHED_REUSE=0 re-places every graph even when its topology, shapes
// and placements equal the previous one's (reuse is on by default).

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_sched * ggml_backend_sched_t;

// Called for each node with ask = true ("do you want to see it?"), then, for
// the nodes answered true, with ask = false once its data is computed;
// returning false then stops the computation.
typedef bool (*ggml_backend_sched_eval_callback)(struct ggml_tensor * t, bool ask, void * user_data);

// bufts may be NULL (each backend's default buffer type). parallel enables
// pipeline parallelism with 4 copies of the split inputs. op_offload lets a
// higher-priority backend take ops whose weights are in host memory.
GGML_API ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts,
                                                     int n_backends, size_t graph_size, bool parallel,
                                                     bool op_offload);
GGML_API void ggml_backend_sched_free(ggml_backend_sched_t sched); // NULL is a no-op

// Plans the memory of a worst-case graph without allocating the graph.
// Returns false (logged) when the buffers cannot be allocated.
GGML_API bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph);
// The buffer sizes per backend that reserve would allocate.
GGML_API void ggml_backend_sched_reserve_size(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph,
                                              size_t * sizes);

GGML_API int            ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched);
GGML_API ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i);
GGML_API int            ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched);
GGML_API int            ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched);

GGML_API ggml_backend_buffer_type_t ggml_backend_sched_get_buffer_type(ggml_backend_sched_t sched,
                                                                       ggml_backend_t       backend);
GGML_API size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend);

// Pins a node to a backend until the next reset; pins are never overridden.
GGML_API void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node,
                                                    ggml_backend_t backend);
// NULL when the tensor has no backend yet.
GGML_API ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node);

// Places and splits a graph without allocating it.
GGML_API void ggml_backend_sched_split_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
// Places, splits and allocates a graph; false (logged) on allocation failure.
GGML_API bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph);

// Allocates the graph if needed and computes it.
GGML_API enum ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
GGML_API enum ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched,
                                                                 struct ggml_cgraph * graph);
GGML_API void             ggml_backend_sched_synchronize(ggml_backend_sched_t sched);

// Forgets the placement and allocation of the current graph.
GGML_API void ggml_backend_sched_reset(ggml_backend_sched_t sched);

GGML_API void ggml_backend_sched_set_eval_callback(ggml_backend_sched_t sched, ggml_backend_sched_eval_callback callback,
                                                   void * user_data);

//
// loom extensions
//

struct loom_sched_stats {
    unsigned long long n_plans;      // graphs placed and split from scratch
    unsigned long long n_reused;     // graphs that reused the previous placement (same topology and shapes)
    int                n_splits;     // of the current graph
    size_t             bytes_copied; // split inputs copied between backends since creation
    unsigned long long n_refreshed;  // reused graphs whose scheduler graph was refreshed in place, not rebuilt
};
GGML_API void loom_sched_get_stats(ggml_backend_sched_t sched, struct loom_sched_stats * stats);

// Records a Chrome trace of every computation (splits and copies, timed
// with a synchronisation after each) to path; NULL stops recording. The file
// is written by loom_sched_write_trace and when the scheduler is freed.
GGML_API void loom_sched_set_trace(ggml_backend_sched_t sched, const char * path);
GGML_API bool loom_sched_write_trace(ggml_backend_sched_t sched);

// Writes the placed graph as Graphviz, nodes coloured by backend. The graph
// must have been split (alloc_graph or split_graph) by this scheduler.
GGML_API bool loom_sched_dump_dot(ggml_backend_sched_t sched, const struct ggml_cgraph * graph, const char * path);

#ifdef __cplusplus
}
#endif
