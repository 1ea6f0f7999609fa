// Linear allocation of tensors into one buffer, and whole-context allocation.

#include <vector>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "ggml-alloc.h"

using namespace loom;

extern "C" {

ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer) {
    LOOM_REQUIRE(buffer != nullptr, "NULL buffer");
    void * base  = ggml_backend_buffer_get_base(buffer);
    size_t align = ggml_backend_buffer_get_alignment(buffer);
    LOOM_REQUIRE(align > 0 && (align & (align - 1)) == 0, "buffer %s has alignment %zu, not a power of two",
                 ggml_backend_buffer_name(buffer), align);
    // The first tensor goes at the first aligned address of the buffer.
    const size_t offset = align_up(reinterpret_cast<uintptr_t>(base), align) - reinterpret_cast<uintptr_t>(base);
    return ggml_tallocr{buffer, base, align, offset};
}

ggml_status ggml_tallocr_alloc(ggml_tallocr * talloc, ggml_tensor * tensor) {
    const size_t size = ggml_backend_buffer_get_alloc_size(talloc->buffer, tensor);
    const size_t cap  = ggml_backend_buffer_get_size(talloc->buffer);
    if (talloc->offset > cap || size > cap - talloc->offset) {
        LOOM_LOG_ERROR("ggml_tallocr_alloc: not enough space in buffer %s for tensor %s (needed %zu bytes, %zu of %zu "
                       "available)\n",
                       ggml_backend_buffer_name(talloc->buffer), describe(tensor).text, size,
                       talloc->offset > cap ? size_t(0) : cap - talloc->offset, cap);
        return GGML_STATUS_ALLOC_FAILED;
    }
    void * addr = static_cast<char *>(talloc->base) + talloc->offset;
    talloc->offset += align_up(size, talloc->alignment);
    return ggml_backend_tensor_alloc(talloc->buffer, tensor, addr);
}

size_t ggml_backend_alloc_ctx_tensors_from_buft_size(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    const size_t align = ggml_backend_buft_get_alignment(buft);
    size_t       total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) {
            total += align_up(ggml_backend_buft_get_alloc_size(buft, t), align);
        }
    }
    return total;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    LOOM_REQUIRE(ctx != nullptr && buft != nullptr, "NULL context or buffer type");
    LOOM_REQUIRE(ggml_get_no_alloc(ctx), "the context must be created with no_alloc = true");

    const size_t total = ggml_backend_alloc_ctx_tensors_from_buft_size(ctx, buft);
    if (total == 0) {
        // Nothing to allocate (ggml returns NULL here too, without error).
        for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
            if (t->data == nullptr && t->view_src != nullptr && t->view_src->data != nullptr) {
                ggml_backend_view_init(t);
            }
        }
        return nullptr;
    }
    const size_t max_size = ggml_backend_buft_get_max_size(buft);
    if (total > max_size) {
        LOOM_LOG_ERROR("ggml_backend_alloc_ctx_tensors_from_buft: the tensors need %zu bytes, more than the %zu "
                       "a buffer of %s may hold\n",
                       total, max_size, ggml_backend_buft_name(buft));
        return nullptr;
    }
    ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(buft, total);
    if (buffer == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_alloc_ctx_tensors_from_buft: failed to allocate a %s buffer of %zu bytes\n",
                       ggml_backend_buft_name(buft), total);
        return nullptr;
    }

    ggml_tallocr talloc = ggml_tallocr_new(buffer);
    std::vector<ggml_tensor *> done;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        ggml_status st = GGML_STATUS_SUCCESS;
        if (t->data == nullptr && t->view_src == nullptr) {
            st = ggml_tallocr_alloc(&talloc, t);
        } else if (t->data == nullptr && t->view_src != nullptr && t->view_src->data != nullptr) {
            st = ggml_backend_view_init(t);
        } else {
            continue;
        }
        if (st != GGML_STATUS_SUCCESS) {
            // Leave the context as it was.
            for (ggml_tensor * d : done) {
                d->buffer = nullptr;
                d->data   = nullptr;
            }
            ggml_backend_buffer_free(buffer);
            LOOM_LOG_ERROR("ggml_backend_alloc_ctx_tensors_from_buft: failed to initialise tensor %s\n",
                           describe(t).text);
            return nullptr;
        }
        done.push_back(t);
    }
    return buffer;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend) {
    return ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(backend));
}

} // extern "C"
