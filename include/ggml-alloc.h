#pragma once

// loom: allocation of tensors into backend buffers.
//
// ggml_tallocr places tensors one after another in a buffer.
// ggml_backend_alloc_ctx_tensors* size, allocate and fill one buffer with
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

// Bytes ggml_backend_alloc_ctx_tensors_from_buft would allocate.
GGML_API size_t ggml_backend_alloc_ctx_tensors_from_buft_size(struct ggml_context * ctx,
                                                              ggml_backend_buffer_type_t buft);
// Allocates one buffer holding every tensor of ctx that has no data (views
// are initialised from their source). The caller owns the buffer. Returns
// NULL when there is nothing to allocate, or (logged) on failure, in which
// case no tensor of ctx is changed.
GGML_API struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context *       ctx,
                                                                              ggml_backend_buffer_type_t buft);
GGML_API struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx,
                                                                    ggml_backend_t        backend);

#ifdef __cplusplus
}
#endif
