// Multi-buffers: one handle over several buffers of the same type.

#include <new>

#include "backend_impl.h"
#include "core/common.h"

namespace loom {

namespace {
size_t total_size(ggml_backend_buffer * const * parts, size_t n_parts) {
    size_t total = 0;
    for (size_t i = 0; i < n_parts; ++i) {
        total += parts[i]->size;
    }
    return total;
}
} // namespace

MultiBuffer::MultiBuffer(ggml_backend_buffer * const * parts, size_t n_parts)
    : ggml_backend_buffer(parts[0]->buft, total_size(parts, n_parts)), parts_(parts, parts + n_parts) {}

MultiBuffer::~MultiBuffer() {
    for (ggml_backend_buffer * p : parts_) {
        delete p;
    }
}

// Tensors are never placed in the multi-buffer itself (their buffer is one
// of the parts), so the data entry points below are only reached by a bug.
void * MultiBuffer::base() {
    fail(__func__, "a multi-buffer has no base address of its own; tensors live in its parts");
}
void MultiBuffer::set_tensor(ggml_tensor * t, const void *, size_t, size_t) {
    fail(__func__, "tensor %s refers to a multi-buffer instead of one of its parts", describe(t).text);
}
void MultiBuffer::get_tensor(const ggml_tensor * t, void *, size_t, size_t) {
    fail(__func__, "tensor %s refers to a multi-buffer instead of one of its parts", describe(t).text);
}
void MultiBuffer::memset_tensor(ggml_tensor * t, uint8_t, size_t, size_t) {
    fail(__func__, "tensor %s refers to a multi-buffer instead of one of its parts", describe(t).text);
}

void MultiBuffer::clear(uint8_t value) {
    for (ggml_backend_buffer * p : parts_) {
        ggml_backend_buffer_clear(p, value);
    }
}

void MultiBuffer::reset() {
    for (ggml_backend_buffer * p : parts_) {
        p->reset();
    }
}

void MultiBuffer::set_usage(ggml_backend_buffer_usage u) {
    usage = u;
    for (ggml_backend_buffer * p : parts_) {
        p->set_usage(u);
    }
}

} // namespace loom

using loom::MultiBuffer;

extern "C" {

ggml_backend_buffer_t ggml_backend_multi_buffer_alloc_buffer(ggml_backend_buffer_t * buffers, size_t n_buffers) {
    LOOM_REQUIRE(buffers != nullptr && n_buffers > 0, "no buffers given (buffers %p, n_buffers %zu)",
                 static_cast<void *>(buffers), n_buffers);
    for (size_t i = 0; i < n_buffers; ++i) {
        LOOM_REQUIRE(buffers[i] != nullptr, "buffers[%zu] is NULL", i);
        LOOM_REQUIRE(buffers[i]->buft == buffers[0]->buft,
                     "buffers[%zu] is of type %s, buffers[0] of type %s; the parts must share one type", i,
                     buffers[i]->buft->name(), buffers[0]->buft->name());
    }
    try {
        return new MultiBuffer(buffers, n_buffers);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("%s: out of memory for a multi-buffer of %zu parts\n", __func__, n_buffers);
        return nullptr;
    }
}

bool ggml_backend_buffer_is_multi_buffer(ggml_backend_buffer_t buffer) {
    LOOM_REQUIRE(buffer != nullptr, "NULL buffer");
    return dynamic_cast<MultiBuffer *>(buffer) != nullptr;
}

void ggml_backend_multi_buffer_set_usage(ggml_backend_buffer_t buffer, ggml_backend_buffer_usage usage) {
    LOOM_REQUIRE(buffer != nullptr && ggml_backend_buffer_is_multi_buffer(buffer),
                 "buffer %s is not a multi-buffer", buffer != nullptr ? buffer->buft->name() : "(NULL)");
    buffer->set_usage(usage);
}

} // extern "C"
