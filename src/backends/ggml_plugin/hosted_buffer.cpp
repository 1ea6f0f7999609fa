// The plugin's buffer types and buffers as loom objects.

#include <cstring>
#include <vector>

#include "core/common.h"
#include "hosted.h"
#include "shadow.h"

namespace loom::ggml_plugin {

ggml_abi::Buffer * foreign_buffer(const ggml_backend_buffer * buffer, const HostedReg & reg) {
    const auto * hosted = dynamic_cast<const HostedBuffer *>(buffer);
    return hosted != nullptr && &hosted->hosted_reg() == &reg ? hosted->foreign() : nullptr;
}

HostedBufferType::HostedBufferType(HostedReg * reg, ggml_abi::BufferType * buft, HostedDevice * dev)
    : ggml_backend_buffer_type(dev), hreg_(reg), buft_(buft),
      name_(std::string("ggml:") + buft->iface.get_name(buft)) {}

ggml_backend_buffer * HostedBufferType::alloc_buffer(size_t size) {
    // ggml's front end gives a buffer of 0 bytes without asking the plugin,
    // whose allocators may refuse 0; loom asks for one byte and shows none.
    ggml_abi::Buffer * b = buft_->iface.alloc_buffer(buft_, size > 0 ? size : 1);
    if (b == nullptr) {
        LOOM_LOG_ERROR("%s: the plugin could not allocate a buffer of %zu bytes\n", name(), size);
        return nullptr;
    }
    return new HostedBuffer(this, b, size);
}

size_t HostedBufferType::alignment() const {
    return buft_->iface.get_alignment(buft_);
}

size_t HostedBufferType::max_size() const {
    return buft_->iface.get_max_size != nullptr ? buft_->iface.get_max_size(buft_) : SIZE_MAX;
}

size_t HostedBufferType::alloc_size(const ggml_tensor * t) const {
    if (buft_->iface.get_alloc_size == nullptr) {
        return ggml_nbytes(t);
    }
    TensorShadow s(t, *hreg_, false);
    return buft_->iface.get_alloc_size(buft_, s.get());
}

bool HostedBufferType::is_host() const {
    return buft_->iface.is_host != nullptr && buft_->iface.is_host(buft_);
}

HostedBuffer::HostedBuffer(HostedBufferType * type, ggml_abi::Buffer * buffer, size_t size_bytes)
    : ggml_backend_buffer(type, size_bytes), buf_(buffer) {
    usage = buffer->usage;
}

HostedBuffer::~HostedBuffer() {
    hosted_reg().free_buffer(buf_);
}

void * HostedBuffer::base() {
    return buf_->iface.get_base(buf_);
}

// The plugin's init_tensor may keep state for the tensor in its extra
// field (ggml's CPU repacking does); the loom tensor holds it for the
// shadows made later (shadow.h).
ggml_status HostedBuffer::init_tensor(ggml_tensor * t) {
    if (buf_->iface.init_tensor == nullptr) {
        return GGML_STATUS_SUCCESS;
    }
    TensorShadow      s(t, hosted_reg(), false);
    const ggml_status status = buf_->iface.init_tensor(buf_, s.get());
    t->extra                 = s.get()->extra;
    return status;
}

void HostedBuffer::set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    TensorShadow s(t, hosted_reg(), false);
    buf_->iface.set_tensor(buf_, s.get(), data, offset, n);
}

void HostedBuffer::get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    TensorShadow s(t, hosted_reg(), false);
    buf_->iface.get_tensor(buf_, s.get(), data, offset, n);
}

void HostedBuffer::memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    TensorShadow s(t, hosted_reg(), false);
    if (buf_->iface.memset_tensor != nullptr) {
        buf_->iface.memset_tensor(buf_, s.get(), value, offset, n);
        return;
    }
    // ggml's front end refuses a buffer without memset_tensor; loom's
    // callers expect it to work, so it goes through set_tensor.
    std::vector<uint8_t> bytes(n, value);
    buf_->iface.set_tensor(buf_, s.get(), bytes.data(), offset, n);
}

void HostedBuffer::set_tensor_2d(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                                 size_t stride_tensor, size_t stride_data) {
    if (buf_->iface.set_tensor_2d == nullptr) {
        ggml_backend_buffer::set_tensor_2d(t, data, offset, n, n_copies, stride_tensor, stride_data);
        return;
    }
    TensorShadow s(t, hosted_reg(), false);
    buf_->iface.set_tensor_2d(buf_, s.get(), data, offset, n, n_copies, stride_tensor, stride_data);
}

void HostedBuffer::get_tensor_2d(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                                 size_t stride_tensor, size_t stride_data) {
    if (buf_->iface.get_tensor_2d == nullptr) {
        ggml_backend_buffer::get_tensor_2d(t, data, offset, n, n_copies, stride_tensor, stride_data);
        return;
    }
    TensorShadow s(t, hosted_reg(), false);
    buf_->iface.get_tensor_2d(buf_, s.get(), data, offset, n, n_copies, stride_tensor, stride_data);
}

// Only between buffers of the same plugin: the plugin can read no other.
bool HostedBuffer::cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) {
    if (buf_->iface.cpy_tensor == nullptr || foreign_buffer(src->buffer, hosted_reg()) == nullptr) {
        return false;
    }
    TensorShadow s(src, hosted_reg(), false);
    TensorShadow d(dst, hosted_reg(), false);
    return buf_->iface.cpy_tensor(buf_, s.get(), d.get());
}

void HostedBuffer::clear(uint8_t value) {
    buf_->iface.clear(buf_, value);
}

void HostedBuffer::reset() {
    if (buf_->iface.reset != nullptr) {
        buf_->iface.reset(buf_);
    }
}

void HostedBuffer::set_usage(ggml_backend_buffer_usage u) {
    ggml_backend_buffer::set_usage(u);
    buf_->usage = u;
}

} // namespace loom::ggml_plugin
