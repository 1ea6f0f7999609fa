// Buffer types, buffers, and reading/writing tensor data through them.

#include <cstring>
#include <memory>

#include "backend_impl.h"
#include "core/common.h"

using namespace loom;

namespace loom {

void check_2d(const ggml_tensor * tensor, size_t offset, size_t size, size_t n_copies, size_t stride_tensor,
              const char * func) {
    LOOM_REQUIRE(tensor != nullptr && tensor->data != nullptr, "called from %s: tensor %s is not allocated", func,
                 describe(tensor).text);
    // The last block ends at offset + (n_copies - 1) * stride_tensor + size;
    // the blocks before it start lower.
    size_t     span = 0, last = 0;
    const bool ok   = !__builtin_mul_overflow(n_copies - 1, stride_tensor, &span) &&
                    !__builtin_add_overflow(offset, span, &last) && last <= ggml_nbytes(tensor) &&
                    size <= ggml_nbytes(tensor) - last;
    LOOM_REQUIRE(ok,
                 "called from %s: %zu rows of %zu bytes from offset %zu, stride %zu, are out of bounds of tensor %s "
                 "(%zu bytes)",
                 func, n_copies, size, offset, stride_tensor, describe(tensor).text, ggml_nbytes(tensor));
}

void HostBuffer::set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    std::memcpy(static_cast<char *>(t->data) + offset, data, n);
}
void HostBuffer::get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    std::memcpy(data, static_cast<const char *>(t->data) + offset, n);
}
void HostBuffer::memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    std::memset(static_cast<char *>(t->data) + offset, value, n);
}
bool HostBuffer::cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) {
    if (src->buffer != nullptr && src->buffer->buft->is_host()) {
        std::memcpy(dst->data, src->data, ggml_nbytes(src));
        return true;
    }
    return false;
}
void HostBuffer::clear(uint8_t value) {
    if (size > 0) {
        std::memset(data_, value, size);
    }
}

} // namespace loom

void ggml_backend_buffer::set_tensor_2d(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                                        size_t stride_tensor, size_t stride_data) {
    for (size_t i = 0; i < n_copies; ++i) {
        set_tensor(t, static_cast<const char *>(data) + i * stride_data, offset + i * stride_tensor, n);
    }
}

void ggml_backend_buffer::get_tensor_2d(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                                        size_t stride_tensor, size_t stride_data) {
    for (size_t i = 0; i < n_copies; ++i) {
        get_tensor(t, static_cast<char *>(data) + i * stride_data, offset + i * stride_tensor, n);
    }
}

namespace {

// The tensor's buffer, or abort naming the caller when it has none.
ggml_backend_buffer * buffer_of(const ggml_tensor * t, const char * caller) {
    LOOM_REQUIRE(t != nullptr, "called from %s with a NULL tensor", caller);
    ggml_backend_buffer * buf = t->view_src != nullptr ? t->view_src->buffer : t->buffer;
    LOOM_REQUIRE(buf != nullptr, "called from %s: tensor %s has no buffer (not allocated)", caller,
                 describe(t).text);
    LOOM_REQUIRE(t->data != nullptr, "called from %s: tensor %s has no data", caller, describe(t).text);
    return buf;
}

void check_range(const ggml_tensor * t, size_t offset, size_t size, const char * caller) {
    const size_t nbytes = ggml_nbytes(t);
    LOOM_REQUIRE(offset <= nbytes && size <= nbytes - offset,
                 "called from %s: offset %zu + size %zu is out of bounds of tensor %s (%zu bytes)", caller, offset,
                 size, describe(t).text, nbytes);
}

} // namespace

extern "C" {

// ---- buffer types ----------------------------------------------------------

const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft) {
    return buft->name();
}

ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    LOOM_REQUIRE(buft != nullptr, "NULL buffer type");
    return buft->alloc_buffer(size);
}

size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft) {
    return buft->alignment();
}
size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft) {
    return buft->max_size();
}
size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const ggml_tensor * tensor) {
    const size_t n = buft->alloc_size(tensor);
    LOOM_ASSERT(n >= ggml_nbytes(tensor));
    return n;
}
bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft) {
    return buft->is_host();
}
ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft) {
    return buft->device;
}

// ---- buffers ---------------------------------------------------------------

const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer) {
    return buffer->buft->name();
}

void ggml_backend_buffer_free(ggml_backend_buffer_t buffer) {
    delete buffer;
}

void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer) {
    // A zero-size buffer has no memory; ggml returns NULL for it.
    if (buffer->size == 0) {
        return nullptr;
    }
    return buffer->base();
}

size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer) {
    return buffer->size;
}

ggml_status ggml_backend_buffer_init_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor) {
    return buffer->init_tensor(tensor);
}

size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer) {
    return buffer->buft->alignment();
}
size_t ggml_backend_buffer_get_max_size(ggml_backend_buffer_t buffer) {
    return buffer->buft->max_size();
}
size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const ggml_tensor * tensor) {
    return ggml_backend_buft_get_alloc_size(buffer->buft, tensor);
}

void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    if (buffer->size > 0) {
        buffer->clear(value);
    }
}

bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer) {
    return buffer->buft->is_host();
}

void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, ggml_backend_buffer_usage usage) {
    buffer->set_usage(usage);
}
ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer) {
    return buffer->usage;
}
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer) {
    return buffer->buft;
}
void ggml_backend_buffer_reset(ggml_backend_buffer_t buffer) {
    buffer->reset();
}

// ---- tensor data -----------------------------------------------------------

void ggml_backend_tensor_set(ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    ggml_backend_buffer * buf = buffer_of(tensor, __func__);
    check_range(tensor, offset, size, __func__);
    if (size == 0) {
        return;
    }
    buf->set_tensor(tensor, data, offset, size);
}

void ggml_backend_tensor_get(const ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    ggml_backend_buffer * buf = buffer_of(tensor, __func__);
    check_range(tensor, offset, size, __func__);
    if (size == 0) {
        return;
    }
    buf->get_tensor(tensor, data, offset, size);
}

void ggml_backend_tensor_set_2d(ggml_tensor * tensor, const void * data, size_t offset, size_t size, size_t n_copies,
                                size_t stride_tensor, size_t stride_data) {
    ggml_backend_buffer * buf = buffer_of(tensor, __func__);
    if (n_copies == 0 || size == 0) {
        return;
    }
    check_2d(tensor, offset, size, n_copies, stride_tensor, __func__);
    if (n_copies == 1) {
        buf->set_tensor(tensor, data, offset, size);
        return;
    }
    buf->set_tensor_2d(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

void ggml_backend_tensor_get_2d(const ggml_tensor * tensor, void * data, size_t offset, size_t size, size_t n_copies,
                                size_t stride_tensor, size_t stride_data) {
    ggml_backend_buffer * buf = buffer_of(tensor, __func__);
    if (n_copies == 0 || size == 0) {
        return;
    }
    check_2d(tensor, offset, size, n_copies, stride_tensor, __func__);
    if (n_copies == 1) {
        buf->get_tensor(tensor, data, offset, size);
        return;
    }
    buf->get_tensor_2d(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

void ggml_backend_tensor_memset(ggml_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    ggml_backend_buffer * buf = buffer_of(tensor, __func__);
    check_range(tensor, offset, size, __func__);
    if (size == 0) {
        return;
    }
    buf->memset_tensor(tensor, value, offset, size);
}

void ggml_backend_tensor_copy(const ggml_tensor * src, ggml_tensor * dst) {
    LOOM_REQUIRE(ggml_are_same_shape(src, dst) && src->type == dst->type,
                 "source %s and destination %s differ in shape or type", describe(src).text, describe(dst).text);
    if (src == dst) {
        return;
    }
    ggml_backend_buffer * sbuf = buffer_of(src, __func__);
    ggml_backend_buffer * dbuf = buffer_of(dst, __func__);
    const size_t          n    = ggml_nbytes(src);
    if (sbuf->buft->is_host()) {
        dbuf->set_tensor(dst, src->data, 0, n);
    } else if (dbuf->buft->is_host()) {
        sbuf->get_tensor(src, dst->data, 0, n);
    } else if (!dbuf->cpy_tensor(src, dst)) {
        // Neither side can reach the other's memory: stage through the host.
        std::unique_ptr<char[]> staging(new char[n]);
        sbuf->get_tensor(src, staging.get(), 0, n);
        dbuf->set_tensor(dst, staging.get(), 0, n);
    }
}

ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, ggml_tensor * tensor, void * addr) {
    LOOM_REQUIRE(buffer != nullptr && tensor != nullptr, "NULL buffer or tensor");
    LOOM_REQUIRE(tensor->buffer == nullptr && tensor->data == nullptr, "tensor %s is already allocated",
                 describe(tensor).text);
    LOOM_REQUIRE(tensor->view_src == nullptr, "tensor %s is a view; use ggml_backend_view_init",
                 describe(tensor).text);
    char * const base = static_cast<char *>(buffer->base());
    char * const p    = static_cast<char *>(addr);
    LOOM_REQUIRE(p >= base && size_t(p - base) + ggml_backend_buffer_get_alloc_size(buffer, tensor) <= buffer->size,
                 "tensor %s (%zu bytes) at offset %td does not fit buffer %s of %zu bytes", describe(tensor).text,
                 ggml_backend_buffer_get_alloc_size(buffer, tensor), p - base, buffer->buft->name(), buffer->size);
    tensor->buffer = buffer;
    tensor->data   = addr;
    return buffer->init_tensor(tensor);
}

ggml_status ggml_backend_view_init(ggml_tensor * tensor) {
    LOOM_REQUIRE(tensor != nullptr && tensor->view_src != nullptr, "tensor %s is not a view", describe(tensor).text);
    LOOM_REQUIRE(tensor->view_src->buffer != nullptr && tensor->view_src->data != nullptr,
                 "the source of view %s is not allocated", describe(tensor).text);
    tensor->buffer = tensor->view_src->buffer;
    tensor->data   = static_cast<char *>(tensor->view_src->data) + tensor->view_offs;
    return tensor->buffer->init_tensor(tensor);
}

// Declared in ggml.h with the core's functions; it lives here because a
// tensor in a backend buffer is cleared through that buffer.
ggml_tensor * ggml_set_zero(ggml_tensor * tensor) {
    if (ggml_is_empty(tensor)) {
        return tensor;
    }
    if (tensor->buffer != nullptr) {
        ggml_backend_tensor_memset(tensor, 0, 0, ggml_nbytes(tensor));
    } else {
        LOOM_REQUIRE(tensor->data != nullptr, "%s has no data", describe(tensor).text);
        std::memset(tensor->data, 0, ggml_nbytes(tensor));
    }
    return tensor;
}

} // extern "C"
