#pragma once

// loom: allocation of tensors into backend buffers.
//
// ggml_tallocr places tensors one after another in a buffer.
// ggml_gallocr plans and allocates the memory of a compute graph.
// ggml_backend_alloc_ctx_tensors* size, allocate and fill buffers with
// every tensor of a context that has no data yet.

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer *      ggml_backend_buffer_t;
typedef struct ggml_backend *             ggml_backend_t;

// Linear allocator over one buffer. The buffer stays owned by the caller.
struct ggml_tallocr {
    ggml_backend_buffer_t buffer;
    void *                base;
    size_t                alignment;
    size_t                offset;
};

GGML_API struct ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer);
// GGML_STATUS_ALLOC_FAILED (logged) when the tensor does not fit.
GGML_API enum ggml_status ggml_tallocr_alloc(struct ggml_tallocr * talloc, struct ggml_tensor * tensor);

// Graph allocator: the memory of a compute graph's intermediate tensors.
//
//     ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
//     ggml_gallocr_reserve(galloc, build_graph(max_batch)); // optional: size for the worst case
//     struct ggml_cgraph * graph = build_graph(batch);
//     ggml_gallocr_alloc_graph(galloc, graph);              // sets data of the graph's tensors
//     ggml_backend_graph_compute(backend, graph);
//
// The allocator knows the whole graph before it places anything: a tensor's
// memory is reused once its last consumer has run, an op that allows it may
// be computed in place over a source nobody reads afterwards, views take no
// memory and keep their source alive, and tensors that already have data or
// a buffer are never moved. Flags:
//   ggml_set_input():  allocated before any node runs, in memory no node
//                      writes before the input's last consumer, so the caller
//                      can fill it before computing; never computed in place
//   ggml_set_output(): never freed nor overwritten until the graph ends
//
// Errors: failing to allocate a buffer returns false (logged). Misuse (NULL
// arguments, buffer ids out of range) aborts with a message naming the
// function. An allocator is used by one thread at a time.

typedef struct ggml_gallocr * ggml_gallocr_t;

// One buffer per buffer type; bufts[i] is buffer id i (ids naming the same
// buffer type share one buffer). Returns NULL only when out of memory.
// Free with ggml_gallocr_free, which also frees the buffers.
GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
GGML_API ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs);
GGML_API void           ggml_gallocr_free(ggml_gallocr_t galloc); // NULL is a no-op

// Plans graph and allocates buffers large enough for it (buffers only grow;
// past a buffer type's max size, its memory is spread over several buffers).
// The graph's tensors are not modified. node_buffer_ids[i] / leaf_buffer_ids[i]
// give the buffer id of node i / leaf i (NULL: buffer 0 for all). Returns
// false (logged) when a buffer cannot be allocated.
GGML_API bool ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
GGML_API bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids,
                                     const int * leaf_buffer_ids);
// Writes to sizes[i] the bytes buffer id i would need for graph, allocating
// nothing and keeping the current plan (0 for an id whose buffer type an
// earlier id already has, so that the sizes add up).
GGML_API void ggml_gallocr_reserve_n_size(ggml_gallocr_t galloc, struct ggml_cgraph * graph,
                                          const int * node_buffer_ids, const int * leaf_buffer_ids, size_t * sizes);

// Sets the buffer and data of every tensor of graph that needs memory, with
// the current plan (of the last reserve or re-plan) when graph has the same
// structure and no larger tensors. Otherwise an allocator with one buffer id plans graph
// anew and grows its buffer (logged); one with several ids returns false
// (call ggml_gallocr_reserve_n first). Returns false (logged) when a buffer
// cannot be allocated.
GGML_API bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph);

// Bytes of the buffers of buffer id buffer_id; 0 before any reserve, and for
// an id whose buffer type an earlier id has (its buffers are counted there).
GGML_API size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id);

// Bytes ggml_backend_alloc_ctx_tensors_from_buft would allocate.
GGML_API size_t ggml_backend_alloc_ctx_tensors_from_buft_size(struct ggml_context * ctx,
                                                              ggml_backend_buffer_type_t buft);
// Allocates a buffer holding every tensor of ctx that has no data (views
// are initialised from their source). When the tensors exceed the buffer
// type's max size they are spread over several buffers, returned as one
// multi-buffer. The caller owns the buffer. Returns NULL when there is
// nothing to allocate, or (logged) on failure, in which case no tensor of
// ctx is changed.
GGML_API struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context *       ctx,
                                                                              ggml_backend_buffer_type_t buft);
GGML_API struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx,
                                                                    ggml_backend_t        backend);

#ifdef __cplusplus
}
#endif
