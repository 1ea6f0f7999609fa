// Device-local and pinned host buffers and their types.

#include <algorithm>
#include <cstring>
#include <new>

#include "core/common.h"
#include "vk_impl.h"

namespace loom::vk {

namespace {

// Runs fn(offset, n) over [0, total) in pieces of at most k_staging_chunk.
template <typename F>
void in_chunks(size_t total, F fn) {
    for (size_t done = 0; done < total;) {
        const size_t n = std::min(total - done, k_staging_chunk);
        if (!fn(done, n)) {
            return;
        }
        done += n;
    }
}

} // namespace

bool locate(const Device * dev, const ggml_tensor * t, bool device_only, Location * out) {
    const ggml_backend_buffer * b = t->buffer != nullptr ? t->buffer : (t->view_src ? t->view_src->buffer : nullptr);
    if (b == nullptr || t->data == nullptr) {
        return false;
    }
    if (b->buft == const_cast<Device *>(dev)->buffer_type()) {
        out->buffer = static_cast<const DeviceBuffer *>(b)->vk();
        out->offset = DeviceBuffer::offset_of(t);
        return true;
    }
    if (!device_only && b->buft == const_cast<Device *>(dev)->host_buffer_type()) {
        auto * pb   = static_cast<const PinnedBuffer *>(b);
        out->buffer = pb->vk();
        out->offset = size_t(static_cast<const char *>(t->data) -
                             static_cast<const char *>(const_cast<PinnedBuffer *>(pb)->base()));
        return true;
    }
    return false;
}

// ---- types ------------------------------------------------------------------

DeviceBufferType::DeviceBufferType(Device * dev) : ggml_backend_buffer_type(dev), name_(dev->name()) {}

size_t DeviceBufferType::alignment() const {
    // Offsets of tensors are bound as they are (the whole buffer is bound),
    // but keep them aligned for wide loads.
    return std::max<size_t>(64, static_cast<const Device *>(device)->min_storage_alignment());
}

size_t DeviceBufferType::max_size() const {
    return static_cast<const Device *>(device)->max_buffer_size();
}

namespace {

// A buffer of buffer type buft on dev: device-local memory, or host-visible
// memory for the pinned type. NULL with a log line when it cannot be made.
template <class Buffer, class Type>
ggml_backend_buffer * alloc_on(Type * buft, Device * dev, size_t size, size_t max_size, bool host) {
    if (size > max_size) {
        LOOM_LOG_ERROR("%s: a buffer of %zu bytes exceeds the device's maximum of %zu\n", buft->name(), size, max_size);
        return nullptr;
    }
    if (!dev->open()) {
        return nullptr;
    }
    Allocation a;
    if (!dev->create_buffer(size, host, &a)) {
        return nullptr;
    }
    auto * b = new (std::nothrow) Buffer(buft, dev, a, size);
    if (b == nullptr) {
        dev->destroy_buffer(a);
        LOOM_LOG_ERROR("%s: out of host memory\n", buft->name());
    }
    return b;
}

} // namespace

ggml_backend_buffer * DeviceBufferType::alloc_buffer(size_t size) {
    return alloc_on<DeviceBuffer>(this, static_cast<Device *>(device), size, max_size(), false);
}

HostBufferType::HostBufferType(Device * dev)
    : ggml_backend_buffer_type(dev), name_(std::string(dev->name()) + "_Host") {}

size_t HostBufferType::max_size() const {
    return static_cast<const Device *>(device)->max_host_buffer_size();
}

ggml_backend_buffer * HostBufferType::alloc_buffer(size_t size) {
    return alloc_on<PinnedBuffer>(this, static_cast<Device *>(device), size, max_size(), true);
}

// ---- device buffers ---------------------------------------------------------

DeviceBuffer::DeviceBuffer(DeviceBufferType * type, Device * dev, Allocation a, size_t size)
    : ggml_backend_buffer(type, size), dev_(dev), alloc_(a) {
    ++dev_->live;
}

DeviceBuffer::~DeviceBuffer() {
    dev_->destroy_buffer(alloc_);
    --dev_->live;
}

void Device::add_pinned(const void * p, size_t n, VkBuffer b) {
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    pinned_[uintptr_t(p)] = {n, b};
}

void Device::remove_pinned(const void * p) {
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    pinned_.erase(uintptr_t(p));
}

bool Device::find_pinned(const void * p, size_t n, Location * out) {
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    auto it = pinned_.upper_bound(uintptr_t(p));
    if (it == pinned_.begin()) {
        return false;
    }
    --it;
    const uintptr_t start = it->first, at = uintptr_t(p);
    if (at - start > it->second.first || n > it->second.first - (at - start)) {
        return false;
    }
    out->buffer = it->second.second;
    out->offset = size_t(at - start);
    return true;
}

void DeviceBuffer::set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    const size_t base = offset_of(t) + offset;
    Location     pinned;
    if (dev_->find_pinned(data, n, &pinned)) {
        const VkBufferCopy c{VkDeviceSize(pinned.offset), VkDeviceSize(base), VkDeviceSize(n)};
        dev_->run_sync(0, nullptr, [&](VkCommandBuffer cb, const Allocation &) {
            vkCmdCopyBuffer(cb, pinned.buffer, alloc_.buffer, 1, &c);
        }, nullptr);
        return;
    }
    in_chunks(n, [&](size_t done, size_t len) {
        return dev_->run_sync(
            len, [&](const Allocation & st) { std::memcpy(st.mapped, static_cast<const char *>(data) + done, len); },
            [&](VkCommandBuffer cb, const Allocation & st) {
                VkBufferCopy c{0, VkDeviceSize(base + done), VkDeviceSize(len)};
                vkCmdCopyBuffer(cb, st.buffer, alloc_.buffer, 1, &c);
            },
            nullptr);
    });
}

void DeviceBuffer::get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    const size_t base = offset_of(t) + offset;
    Location     pinned;
    if (dev_->find_pinned(data, n, &pinned)) {
        const VkBufferCopy c{VkDeviceSize(base), VkDeviceSize(pinned.offset), VkDeviceSize(n)};
        dev_->run_sync(0, nullptr, [&](VkCommandBuffer cb, const Allocation &) {
            vkCmdCopyBuffer(cb, alloc_.buffer, pinned.buffer, 1, &c);
        }, nullptr);
        return;
    }
    in_chunks(n, [&](size_t done, size_t len) {
        return dev_->run_sync(
            len, nullptr,
            [&](VkCommandBuffer cb, const Allocation & st) {
                VkBufferCopy c{VkDeviceSize(base + done), 0, VkDeviceSize(len)};
                vkCmdCopyBuffer(cb, alloc_.buffer, st.buffer, 1, &c);
            },
            [&](const Allocation & st) { std::memcpy(static_cast<char *>(data) + done, st.mapped, len); });
    });
}

void DeviceBuffer::memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    const size_t base = offset_of(t) + offset;
    in_chunks(n, [&](size_t done, size_t len) {
        return dev_->run_sync(
            len, [&](const Allocation & st) { std::memset(st.mapped, value, len); },
            [&](VkCommandBuffer cb, const Allocation & st) {
                VkBufferCopy c{0, VkDeviceSize(base + done), VkDeviceSize(len)};
                vkCmdCopyBuffer(cb, st.buffer, alloc_.buffer, 1, &c);
            },
            nullptr);
    });
}

bool DeviceBuffer::cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) {
    Location from;
    if (!locate(dev_, src, false, &from)) {
        return false; // ggml copies through the host then
    }
    const VkBufferCopy c{VkDeviceSize(from.offset), VkDeviceSize(offset_of(dst)), VkDeviceSize(ggml_nbytes(src))};
    return dev_->run_sync(0, nullptr, [&](VkCommandBuffer cb, const Allocation &) {
        vkCmdCopyBuffer(cb, from.buffer, alloc_.buffer, 1, &c);
    }, nullptr);
}

void DeviceBuffer::clear(uint8_t value) {
    const uint32_t word = uint32_t(value) * 0x01010101u;
    dev_->run_sync(0, nullptr, [&](VkCommandBuffer cb, const Allocation &) {
        vkCmdFillBuffer(cb, alloc_.buffer, 0, VK_WHOLE_SIZE, word);
    }, nullptr);
}

// ---- pinned host buffers ----------------------------------------------------

PinnedBuffer::PinnedBuffer(HostBufferType * type, Device * dev, Allocation a, size_t size)
    : loom::HostBuffer(type, a.mapped, size), dev_(dev), alloc_(a) {
    dev_->add_pinned(a.mapped, size, a.buffer);
    ++dev_->live;
}

PinnedBuffer::~PinnedBuffer() {
    dev_->remove_pinned(alloc_.mapped);
    dev_->destroy_buffer(alloc_);
    --dev_->live;
}

} // namespace loom::vk
