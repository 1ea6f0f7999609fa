#pragma once

// The classes of the Vulkan backend (see include/ggml-vulkan.h):
//   Device      a physical device; opens its VkDevice on first use, owns the
//               queue, the pipelines, the buffer types and a context for
//               synchronous transfers
//   DeviceBuffer / HostBuffer   device-local and pinned host memory
//   Stream      (in backend.cpp) a backend: command buffers submitted to
//               the device's queue, ordered by a timeline semaphore
//   Event       a timeline semaphore and the last value recorded on it
//
// Note [One queue]: every backend of a device submits to the same VkQueue
// (under the device's queue mutex), and every command buffer starts with a
// full memory barrier. A barrier orders everything earlier in submission
// order on the queue, so work of earlier submissions (another backend's
// graph, a synchronous transfer) is finished and visible before any command
// of a new command buffer runs; events and semaphores are needed only to
// order host-side work, such as another device's stream.

#include <vulkan/vulkan.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend_impl.h"
#include "shaders.h"

namespace loom::vk {

class Device;

// A VkBuffer with its own memory; mapped when host-visible.
struct Allocation {
    VkBuffer       buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void *         mapped = nullptr;
    VkDeviceSize   size   = 0;
};

class DeviceBufferType final : public ggml_backend_buffer_type {
  public:
    explicit DeviceBufferType(Device * dev);
    const char *          name() const override { return name_.c_str(); }
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    size_t                alignment() const override;
    size_t                max_size() const override;

  private:
    std::string name_;
};

class HostBufferType final : public ggml_backend_buffer_type {
  public:
    explicit HostBufferType(Device * dev);
    const char *          name() const override { return name_.c_str(); }
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    size_t                alignment() const override { return 64; }
    size_t                max_size() const override;
    bool                  is_host() const override { return true; }

  private:
    std::string name_;
};

// Device memory. base() is a fake address (never mapped): tensors' data
// pointers are base + offset, and only the offset is used.
class DeviceBuffer final : public ggml_backend_buffer {
  public:
    DeviceBuffer(DeviceBufferType * type, Device * dev, Allocation a, size_t size);
    ~DeviceBuffer() override;

    void * base() override { return fake_base(); }
    void   set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void   get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    void   memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;
    bool   cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override;
    void   clear(uint8_t value) override;

    static void * fake_base() { return reinterpret_cast<void *>(uintptr_t(0x1000)); }
    VkBuffer      vk() const { return alloc_.buffer; }
    Device *      device() const { return dev_; }
    // Byte offset of t's data in this buffer.
    static size_t offset_of(const ggml_tensor * t) {
        return size_t(static_cast<const char *>(t->data) - static_cast<const char *>(fake_base()));
    }

  private:
    Device *   dev_;
    Allocation alloc_;
};

// Pinned host memory: the CPU reads and writes it directly; the device
// copies from and to it without staging.
class PinnedBuffer final : public loom::HostBuffer {
  public:
    PinnedBuffer(HostBufferType * type, Device * dev, Allocation a, size_t size);
    ~PinnedBuffer() override;
    VkBuffer vk() const { return alloc_.buffer; }
    Device * device() const { return dev_; }

  private:
    Device *   dev_;
    Allocation alloc_;
};

class Event final : public ggml_backend_event {
  public:
    Event(Device * dev, VkSemaphore sem);
    ~Event() override;
    VkSemaphore sem;
    uint64_t    value = 0; // the last value recorded; 0: never recorded
};

// Where a tensor's bytes are in Vulkan memory of a device.
struct Location {
    VkBuffer buffer = VK_NULL_HANDLE;
    size_t   offset = 0;
};

// t's location when its data is in a device buffer (device_only) or also a
// pinned buffer of dev; false otherwise.
bool locate(const Device * dev, const ggml_tensor * t, bool device_only, Location * out);

class Device final : public ggml_backend_device {
  public:
    Device(ggml_backend_reg * reg, VkInstance instance, VkPhysicalDevice pd, int index, uint32_t physical_index);
    ~Device() override;

    const char *               name() const override { return name_.c_str(); }
    const char *               description() const override { return description_.c_str(); }
    void                       memory(size_t * free, size_t * total) const override;
    enum ggml_backend_dev_type type() const override;
    ggml_backend_dev_caps      caps() const override;
    const char *               device_id() const override { return nullptr; }

    ggml_backend *             init_backend(const char * params) override;
    ggml_backend_buffer_type * buffer_type() override { return &buft_; }
    ggml_backend_buffer_type * host_buffer_type() override { return &host_buft_; }

    bool supports_op(const ggml_tensor * op) const override;
    bool supports_buft(const ggml_backend_buffer_type * buft) const override { return buft == &buft_; }
    bool offload_op(const ggml_tensor * op) const override;

    ggml_backend_event * event_new() override;
    void                 event_synchronize(ggml_backend_event * event) override;

    // Opens the VkDevice on first use; false (logged) when it cannot be.
    bool     open();
    VkDevice vk() const { return device_; }

    const VkPhysicalDeviceProperties & props() const { return props_; }
    size_t                             max_buffer_size() const { return max_buffer_size_; }
    size_t                             max_host_buffer_size() const { return max_alloc_size_; }
    size_t                             min_storage_alignment() const { return size_t(props_.limits.minStorageBufferOffsetAlignment); }

    // A new buffer of at least size bytes (device-local, or host-visible and
    // coherent and mapped when host); false (logged) when out of memory.
    bool create_buffer(size_t size, bool host, Allocation * out);
    void destroy_buffer(Allocation & a);

    // The pipeline of a shader, created on first use; VK_NULL_HANDLE (logged) on failure.
    VkPipeline            pipeline(Shader s);
    VkPipelineLayout      pipeline_layout() const { return pipeline_layout_; }
    VkDescriptorSetLayout set_layout() const { return set_layout_; }

    VkQueue queue() const { return queue_; }
    uint32_t queue_family() const { return queue_family_; }
    // vkQueueSubmit under the queue mutex.
    VkResult submit(const VkSubmitInfo & info, VkFence fence);

    // Synchronous work: record(cb, staging) with a mapped staging buffer of
    // at least staging_size bytes, then submit and wait. False (logged) on failure.
    bool run_sync(size_t staging_size, const std::function<void(const Allocation &)> & before,
                  const std::function<void(VkCommandBuffer, const Allocation &)> & record,
                  const std::function<void(const Allocation &)> & after);

    // Pinned buffers by mapped address, so that transfers from and to
    // pinned memory copy directly. find_pinned: the buffer and offset of
    // [p, p + n) when the range lies in one pinned buffer.
    void add_pinned(const void * p, size_t n, VkBuffer b);
    void remove_pinned(const void * p);
    bool find_pinned(const void * p, size_t n, Location * out);

    // Live buffers, backends and events: the VkDevice is destroyed at exit
    // only when none is left.
    std::atomic<int> live{0};

  private:
    void close();

    std::string                      name_;
    std::string                      description_;
    VkInstance                       instance_;
    VkPhysicalDevice                 physical_;
    VkPhysicalDeviceProperties       props_{};
    VkPhysicalDeviceMemoryProperties mem_props_{};
    bool                             has_budget_ = false;
    size_t                           max_buffer_size_ = 0;
    size_t                           max_alloc_size_  = 0;
    uint32_t                         queue_family_    = 0;

    DeviceBufferType buft_;
    HostBufferType   host_buft_;

    std::mutex            open_mutex_;
    std::atomic<bool>     opened_{false};
    bool                  open_failed_ = false;
    VkDevice              device_      = VK_NULL_HANDLE;
    VkQueue               queue_       = VK_NULL_HANDLE;
    std::mutex            queue_mutex_;
    VkDescriptorSetLayout set_layout_      = VK_NULL_HANDLE;
    VkPipelineLayout      pipeline_layout_ = VK_NULL_HANDLE;
    std::mutex            pipeline_mutex_;
    std::vector<VkShaderModule> modules_;
    std::vector<VkPipeline>     pipelines_;

    std::mutex pinned_mutex_;
    std::map<uintptr_t, std::pair<size_t, VkBuffer>> pinned_;

    // The synchronous transfer context.
    std::mutex      sync_mutex_;
    VkCommandPool   sync_pool_  = VK_NULL_HANDLE;
    VkCommandBuffer sync_cb_    = VK_NULL_HANDLE;
    VkFence         sync_fence_ = VK_NULL_HANDLE;
    Allocation      sync_staging_;

    friend class Reg;
};

// The first queue family with compute; false without one.
bool compute_family(VkPhysicalDevice pd, uint32_t * out);
// Why a physical device cannot be a loom device; NULL when it can.
const char * unsuitable(VkPhysicalDevice pd);

// A full memory barrier between everything before and everything after.
void full_barrier(VkCommandBuffer cb);

// The largest chunk a synchronous transfer stages at once.
constexpr size_t k_staging_chunk = size_t(16) << 20;

// ---- ops (ops.cpp) ----------------------------------------------------------

// One compute dispatch: the shader, its parameters, the tensors of slots
// src0, src1, src2, dst (NULL where unused) and the workgroup counts.
struct Dispatch {
    Shader              shader = Shader::count;
    Params              params{};
    const ggml_tensor * slot[k_tensor_slots] = {};
    uint32_t            groups[3] = {1, 1, 1};
};

// Whether the shaders compute op exactly as ggml defines it.
bool supports(const ggml_tensor * op);
// The dispatch of a supported, non-empty node.
Dispatch plan(const ggml_tensor * node);
// Note [Indices from data] in backend.cpp: the entry of index source src
// of node in a check's table (the caller sets off, first, zero_at, zero_n),
// and the check of n_entries entries holding n_elements indices in all (the
// caller binds the slots and sets off[1]).
IndexEntry index_entry(const ggml_tensor * node, int src);
Dispatch   plan_check(uint32_t n_elements, uint32_t n_entries);

// Backends (backend.cpp).
ggml_backend * new_backend(Device * dev);
bool           is_stream(const ggml_backend * b);

} // namespace loom::vk
