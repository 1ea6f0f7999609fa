// A Vulkan device: its properties, opening its VkDevice, the pipelines,
// buffer creation and synchronous transfers.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "core/common.h"
#include "ggml-vulkan.h"
#include "vk_impl.h"

namespace loom::vk {

namespace {

const char * type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU device";
        default: return "other device";
    }
}

bool has_extension(VkPhysicalDevice pd, const char * name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) {
        return false;
    }
    std::vector<VkExtensionProperties> ext(n);
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
    return std::any_of(ext.begin(), ext.end(),
                       [name](const VkExtensionProperties & e) { return std::strcmp(e.extensionName, name) == 0; });
}

} // namespace

// The first queue family with compute; false without one.
bool compute_family(VkPhysicalDevice pd, uint32_t * out) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fam(n);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fam.data());
    for (uint32_t i = 0; i < n; ++i) {
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            *out = i;
            return true;
        }
    }
    return false;
}

// Why the device cannot serve as a loom device; NULL when it can.
const char * unsuitable(VkPhysicalDevice pd) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_2) {
        return "it has Vulkan below 1.2";
    }
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(pd, &f);
    if (!f12.timelineSemaphore) {
        return "it has no timeline semaphores";
    }
    if (!f11.storageBuffer16BitAccess) {
        return "it has no 16-bit storage buffers";
    }
    uint32_t family;
    if (!compute_family(pd, &family)) {
        return "it has no compute queue";
    }
    return nullptr;
}

namespace {

uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties & mp, uint32_t bits, VkMemoryPropertyFlags want,
                          VkMemoryPropertyFlags prefer) {
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
        const VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & want) != want) {
            continue;
        }
        if ((f & prefer) == prefer) {
            return i;
        }
        if (fallback == UINT32_MAX) {
            fallback = i;
        }
    }
    return fallback;
}

} // namespace

void full_barrier(VkCommandBuffer cb) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
}

// ---- the device -------------------------------------------------------------

Device::Device(ggml_backend_reg * reg, VkInstance instance, VkPhysicalDevice pd, int index, uint32_t physical_index)
    : ggml_backend_device(reg), instance_(instance), physical_(pd), buft_(this), host_buft_(this) {
    name_ = std::string(GGML_VK_NAME) + std::to_string(index);
    VkPhysicalDeviceDriverProperties   driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    driver.pNext = &m3;
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &driver;
    vkGetPhysicalDeviceProperties2(pd, &p2);
    props_ = p2.properties;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem_props_);
    has_budget_ = has_extension(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    compute_family(pd, &queue_family_);

    description_ = std::string(props_.deviceName) + " (" + driver.driverName + " " + driver.driverInfo + ", " +
                   type_name(props_.deviceType) + ", Vulkan physical device " + std::to_string(physical_index) + ")";
    max_alloc_size_  = size_t(m3.maxMemoryAllocationSize);
    max_buffer_size_ = std::min<size_t>(size_t(props_.limits.maxStorageBufferRange), max_alloc_size_);
    max_buffer_size_ -= max_buffer_size_ % 256;
}

Device::~Device() {
    close();
}

void Device::close() {
    if (device_ == VK_NULL_HANDLE) {
        return;
    }
    vkDeviceWaitIdle(device_);
    destroy_buffer(sync_staging_);
    if (sync_fence_) vkDestroyFence(device_, sync_fence_, nullptr);
    if (sync_pool_) vkDestroyCommandPool(device_, sync_pool_, nullptr);
    for (VkPipeline p : pipelines_) {
        if (p) vkDestroyPipeline(device_, p, nullptr);
    }
    for (VkShaderModule m : modules_) {
        if (m) vkDestroyShaderModule(device_, m, nullptr);
    }
    if (pipeline_layout_) vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
}

void Device::memory(size_t * free, size_t * total) const {
    // The largest device-local heap.
    uint32_t heap = 0;
    VkDeviceSize best = 0;
    for (uint32_t i = 0; i < mem_props_.memoryHeapCount; ++i) {
        if ((mem_props_.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mem_props_.memoryHeaps[i].size > best) {
            best = mem_props_.memoryHeaps[i].size;
            heap = i;
        }
    }
    *total = size_t(best);
    *free  = size_t(best);
    if (has_budget_) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2         mp2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
        mp2.pNext = &budget;
        vkGetPhysicalDeviceMemoryProperties2(physical_, &mp2);
        const VkDeviceSize b = budget.heapBudget[heap], u = budget.heapUsage[heap];
        *free = b > u ? size_t(b - u) : 0;
    }
}

enum ggml_backend_dev_type Device::type() const {
    return props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? GGML_BACKEND_DEVICE_TYPE_IGPU
                                                                        : GGML_BACKEND_DEVICE_TYPE_GPU;
}

ggml_backend_dev_caps Device::caps() const {
    ggml_backend_dev_caps c{};
    c.async                = true;
    c.host_buffer          = true;
    c.buffer_from_host_ptr = false;
    c.events               = true;
    c.mmap_support         = props_.deviceType != VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    return c;
}

ggml_backend * Device::init_backend(const char * params) {
    (void) params;
    if (!open()) {
        return nullptr;
    }
    return new_backend(this);
}

bool Device::supports_op(const ggml_tensor * op) const {
    // A shader binds each tensor as one storage buffer: a tensor larger than
    // the device's binding limit (128 MiB on lavapipe) cannot be computed
    // here, so the scheduler places its op elsewhere.
    if (ggml_nbytes(op) > max_buffer_size_) {
        return false;
    }
    for (const ggml_tensor * s : op->src) {
        if (s != nullptr && ggml_nbytes(s) > max_buffer_size_) {
            return false;
        }
    }
    return supports(op);
}

// Large matrix products whose weights are elsewhere are worth the copy.
bool Device::offload_op(const ggml_tensor * op) const {
    if (op->op != GGML_OP_MUL_MAT || !supports(op)) {
        return false;
    }
    return op->src[1]->ne[1] * op->src[1]->ne[2] * op->src[1]->ne[3] >= 32;
}

ggml_backend_event * Device::event_new() {
    if (!open()) {
        return nullptr;
    }
    VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    tci.initialValue  = 0;
    VkSemaphoreCreateInfo ci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    ci.pNext = &tci;
    VkSemaphore sem = VK_NULL_HANDLE;
    if (vkCreateSemaphore(device_, &ci, nullptr, &sem) != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot create a timeline semaphore for an event\n", name());
        return nullptr;
    }
    auto * e = new (std::nothrow) Event(this, sem);
    if (e == nullptr) {
        vkDestroySemaphore(device_, sem, nullptr);
    }
    return e;
}

void Device::event_synchronize(ggml_backend_event * event) {
    auto * e = static_cast<Event *>(event);
    if (e->value == 0) {
        return;
    }
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    wi.pSemaphores    = &e->sem;
    wi.pValues        = &e->value;
    if (vkWaitSemaphores(device_, &wi, UINT64_MAX) != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: waiting for an event failed (device lost?)\n", name());
    }
}

Event::Event(Device * dev, VkSemaphore s) : ggml_backend_event(dev), sem(s) {
    ++dev->live;
}

Event::~Event() {
    auto * dev = static_cast<Device *>(device);
    vkDestroySemaphore(dev->vk(), sem, nullptr);
    --dev->live;
}

bool Device::open() {
    if (opened_.load(std::memory_order_acquire)) {
        return true;
    }
    std::lock_guard<std::mutex> lock(open_mutex_);
    if (opened_.load(std::memory_order_relaxed)) {
        return true;
    }
    if (open_failed_) {
        return false;
    }
    open_failed_ = true; // until everything below succeeds

    const float             priority = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = queue_family_;
    qci.queueCount       = 1;
    qci.pQueuePriorities = &priority;

    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f12.timelineSemaphore = VK_TRUE;
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.storageBuffer16BitAccess = VK_TRUE;
    f11.pNext                    = &f12;
    std::vector<const char *> extensions;
    if (has_budget_) {
        extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    }
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext                   = &f11;
    dci.queueCreateInfoCount    = 1;
    dci.pQueueCreateInfos       = &qci;
    dci.enabledExtensionCount   = uint32_t(extensions.size());
    dci.ppEnabledExtensionNames = extensions.data();
    VkResult r = vkCreateDevice(physical_, &dci, nullptr, &device_);
    if (r != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: vkCreateDevice failed (VkResult %d)\n", name(), int(r));
        device_ = VK_NULL_HANDLE;
        return false;
    }
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

    VkDescriptorSetLayoutBinding bindings[1 + k_tensor_slots];
    for (uint32_t i = 0; i < 1 + k_tensor_slots; ++i) {
        bindings[i]                    = {};
        bindings[i].binding            = i;
        bindings[i].descriptorType     = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        bindings[i].descriptorCount    = 1;
        bindings[i].stageFlags         = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo slci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    slci.bindingCount = 1 + k_tensor_slots;
    slci.pBindings    = bindings;
    VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    plci.setLayoutCount = 1;
    plci.pSetLayouts    = &set_layout_;
    VkCommandPoolCreateInfo cpci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpci.flags            = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    cpci.queueFamilyIndex = queue_family_;
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vkCreateDescriptorSetLayout(device_, &slci, nullptr, &set_layout_) != VK_SUCCESS ||
        vkCreatePipelineLayout(device_, &plci, nullptr, &pipeline_layout_) != VK_SUCCESS ||
        vkCreateCommandPool(device_, &cpci, nullptr, &sync_pool_) != VK_SUCCESS ||
        vkCreateFence(device_, &fci, nullptr, &sync_fence_) != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot create the device's layouts, command pool or fence\n", name());
        close();
        return false;
    }
    VkCommandBufferAllocateInfo cbai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cbai.commandPool        = sync_pool_;
    cbai.level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cbai.commandBufferCount = 1;
    if (vkAllocateCommandBuffers(device_, &cbai, &sync_cb_) != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot allocate a command buffer\n", name());
        close();
        return false;
    }
    modules_.assign(size_t(Shader::count), VK_NULL_HANDLE);
    pipelines_.assign(size_t(Shader::count), VK_NULL_HANDLE);
    open_failed_ = false;
    opened_.store(true, std::memory_order_release);
    return true;
}

VkPipeline Device::pipeline(Shader s) {
    std::lock_guard<std::mutex> lock(pipeline_mutex_);
    const size_t i = size_t(s);
    if (pipelines_[i] != VK_NULL_HANDLE) {
        return pipelines_[i];
    }
    const ShaderCode         code = shader_code(s);
    VkShaderModuleCreateInfo smci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smci.codeSize = code.bytes;
    smci.pCode    = code.words;
    if (vkCreateShaderModule(device_, &smci, nullptr, &modules_[i]) != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot create the shader module %s\n", name(), shader_name(s));
        return VK_NULL_HANDLE;
    }
    VkComputePipelineCreateInfo cpci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage        = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cpci.stage.stage  = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = modules_[i];
    cpci.stage.pName  = "main";
    cpci.layout       = pipeline_layout_;
    if (vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpci, nullptr, &pipelines_[i]) != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot create the pipeline of shader %s\n", name(), shader_name(s));
        pipelines_[i] = VK_NULL_HANDLE;
    }
    return pipelines_[i];
}

bool Device::create_buffer(size_t size, bool host, Allocation * out) {
    *out = {};
    const VkDeviceSize  bytes = VkDeviceSize((std::max<size_t>(size, 16) + 15) / 16 * 16);
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size        = bytes;
    bci.usage       = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (host) {
        // Staging memory also holds the group counts of indirect dispatches
        // (Note [Indices from data] in backend.cpp).
        bci.usage |= VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
    }
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vkCreateBuffer(device_, &bci, nullptr, &out->buffer);
    if (r != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot create a buffer of %zu bytes (VkResult %d)\n", name(), size, int(r));
        out->buffer = VK_NULL_HANDLE;
        return false;
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, out->buffer, &req);
    const uint32_t type =
        host ? find_memory_type(mem_props_, req.memoryTypeBits,
                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
             : find_memory_type(mem_props_, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type == UINT32_MAX) {
        LOOM_LOG_ERROR("%s: no suitable memory type for a %s buffer\n", name(), host ? "host" : "device");
        destroy_buffer(*out);
        return false;
    }
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize  = req.size;
    mai.memoryTypeIndex = type;
    r                   = vkAllocateMemory(device_, &mai, nullptr, &out->memory);
    if (r != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: cannot allocate %zu bytes of %s memory (VkResult %d)\n", name(), size,
                       host ? "pinned host" : "device", int(r));
        out->memory = VK_NULL_HANDLE;
        destroy_buffer(*out);
        return false;
    }
    if (vkBindBufferMemory(device_, out->buffer, out->memory, 0) != VK_SUCCESS ||
        (host && vkMapMemory(device_, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped) != VK_SUCCESS)) {
        LOOM_LOG_ERROR("%s: cannot bind or map a buffer of %zu bytes\n", name(), size);
        out->mapped = nullptr;
        destroy_buffer(*out);
        return false;
    }
    out->size = bytes;
    return true;
}

void Device::destroy_buffer(Allocation & a) {
    if (a.buffer != VK_NULL_HANDLE) {
        vkDestroyBuffer(device_, a.buffer, nullptr);
    }
    if (a.memory != VK_NULL_HANDLE) {
        vkFreeMemory(device_, a.memory, nullptr); // unmaps too
    }
    a = {};
}

VkResult Device::submit(const VkSubmitInfo & info, VkFence fence) {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return vkQueueSubmit(queue_, 1, &info, fence);
}

bool Device::run_sync(size_t staging_size, const std::function<void(const Allocation &)> & before,
                      const std::function<void(VkCommandBuffer, const Allocation &)> & record,
                      const std::function<void(const Allocation &)> & after) {
    std::lock_guard<std::mutex> lock(sync_mutex_);
    if (staging_size > 0 && sync_staging_.size < staging_size) {
        destroy_buffer(sync_staging_);
        if (!create_buffer(std::max(staging_size, size_t(1) << 20), true, &sync_staging_)) {
            return false;
        }
    }
    if (before) {
        before(sync_staging_);
    }
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkResetCommandBuffer(sync_cb_, 0);
    vkBeginCommandBuffer(sync_cb_, &bi);
    full_barrier(sync_cb_);
    record(sync_cb_, sync_staging_);
    full_barrier(sync_cb_);
    vkEndCommandBuffer(sync_cb_);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers    = &sync_cb_;
    VkResult r = submit(si, sync_fence_);
    if (r == VK_SUCCESS) {
        r = vkWaitForFences(device_, 1, &sync_fence_, VK_TRUE, UINT64_MAX);
    }
    vkResetFences(device_, 1, &sync_fence_);
    if (r != VK_SUCCESS) {
        LOOM_LOG_ERROR("%s: a transfer failed (VkResult %d)\n", name(), int(r));
        return false;
    }
    if (after) {
        after(sync_staging_);
    }
    return true;
}

} // namespace loom::vk
