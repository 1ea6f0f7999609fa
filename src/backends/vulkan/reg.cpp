// The Vulkan family: the instance, the choice of physical devices
// (GGML_VK_VISIBLE_DEVICES) and the C entry points of ggml-vulkan.h.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "core/common.h"
#include "ggml-vulkan.h"
#include "vk_impl.h"

namespace loom::vk {

// The drivers' first calls, under LeakSanitizer: allocations made there are
// not reported. Mesa's lavapipe (Debian 12) keeps 128 bytes from a one-time
// initialization on some processors (seen on a Zen 5), and once the instance
// is destroyed at exit the driver is unloaded, so LeakSanitizer can neither
// name its frames nor match them to a suppression.
struct DriverInit {
#if defined(__SANITIZE_ADDRESS__)
    DriverInit() { __lsan_disable(); }
    ~DriverInit() { __lsan_enable(); }
    DriverInit(const DriverInit &)             = delete;
    DriverInit & operator=(const DriverInit &) = delete;
#endif
};

class Reg final : public ggml_backend_reg {
  public:
    Reg() { enumerate(); }

    ~Reg() override {
        // At exit: close what nobody uses any more (see Device::live); a
        // device still in use by leaked objects stays open.
        bool all_closed = true;
        for (auto & d : devices_) {
            if (d->live.load() == 0) {
                d.reset();
            } else {
                (void) d.release();
                all_closed = false;
            }
        }
        if (instance_ != VK_NULL_HANDLE && all_closed) {
            vkDestroyInstance(instance_, nullptr);
        }
    }

    const char *          name() const override { return GGML_VK_NAME; }
    size_t                device_count() const override { return devices_.size(); }
    ggml_backend_device * device(size_t index) override {
        LOOM_REQUIRE(index < devices_.size(), "device index %zu out of range (%zu Vulkan devices)", index,
                     devices_.size());
        return devices_[index].get();
    }
    Device * at(size_t index) { return index < devices_.size() ? devices_[index].get() : nullptr; }

  private:
    void enumerate() {
        const char * env = std::getenv("GGML_VK_VISIBLE_DEVICES");
        if (env != nullptr && std::strpbrk(env, "0123456789") == nullptr) {
            // An empty list: no devices, and no instance (loading the
            // drivers costs a tenth of a second or more).
            return;
        }
        VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
        app.pApplicationName = "loom";
        app.pEngineName      = "loom";
        app.apiVersion       = VK_API_VERSION_1_2;
        VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
        ici.pApplicationInfo = &app;
        std::vector<VkPhysicalDevice> pds;
        {
            [[maybe_unused]] DriverInit scope;
            const VkResult r = vkCreateInstance(&ici, nullptr, &instance_);
            if (r != VK_SUCCESS) {
                // No loader-visible driver: simply no devices, silently
                // (every program enumerates the registry).
                instance_ = VK_NULL_HANDLE;
                return;
            }
            uint32_t n = 0;
            vkEnumeratePhysicalDevices(instance_, &n, nullptr);
            pds.resize(n);
            if (n > 0) {
                vkEnumeratePhysicalDevices(instance_, &n, pds.data());
            }
        }

        std::vector<uint32_t> chosen;
        if (env != nullptr) {
            // Indices in the loader's order, any device type.
            std::string list(env);
            std::replace(list.begin(), list.end(), ',', ' ');
            const char * p = list.c_str();
            char *       end;
            for (long v = std::strtol(p, &end, 10); end != p; v = std::strtol(p, &end, 10)) {
                p = end;
                if (v < 0 || size_t(v) >= pds.size()) {
                    LOOM_LOG_WARN("Vulkan: GGML_VK_VISIBLE_DEVICES names device %ld, there are %zu\n", v, pds.size());
                } else if (std::find(chosen.begin(), chosen.end(), uint32_t(v)) == chosen.end()) {
                    chosen.push_back(uint32_t(v));
                }
            }
        } else {
            for (uint32_t i = 0; i < uint32_t(pds.size()); ++i) {
                VkPhysicalDeviceProperties props;
                vkGetPhysicalDeviceProperties(pds[i], &props);
                if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
                    props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) {
                    chosen.push_back(i);
                }
            }
        }
        for (uint32_t i : chosen) {
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(pds[i], &props);
            if (const char * why = unsuitable(pds[i])) {
                LOOM_LOG_WARN("Vulkan: device %u (%s) is not used: %s\n", i, props.deviceName, why);
                continue;
            }
            auto * d = new (std::nothrow) Device(this, instance_, pds[i], int(devices_.size()), i);
            if (d != nullptr) {
                devices_.emplace_back(d);
            }
        }
    }

    VkInstance                           instance_ = VK_NULL_HANDLE;
    std::vector<std::unique_ptr<Device>> devices_;
};

Reg & vk_reg() {
    static Reg reg;
    return reg;
}

} // namespace loom::vk

using loom::vk::vk_reg;

extern "C" {

ggml_backend_reg_t ggml_backend_vk_reg(void) {
    return &vk_reg();
}

ggml_backend_t ggml_backend_vk_init(size_t dev_num) {
    loom::vk::Device * d = vk_reg().at(dev_num);
    if (d == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_vk_init: no Vulkan device %zu (%zu devices)\n", dev_num, vk_reg().device_count());
        return nullptr;
    }
    return d->init_backend(nullptr);
}

bool ggml_backend_is_vk(ggml_backend_t backend) {
    return backend != nullptr && loom::vk::is_stream(backend);
}

int ggml_backend_vk_get_device_count(void) {
    return int(vk_reg().device_count());
}

void ggml_backend_vk_get_device_description(int device, char * description, size_t description_size) {
    if (description == nullptr || description_size == 0) {
        return;
    }
    loom::vk::Device * d = device >= 0 ? vk_reg().at(size_t(device)) : nullptr;
    std::snprintf(description, description_size, "%s", d != nullptr ? d->description() : "");
}

void ggml_backend_vk_get_device_memory(int device, size_t * free, size_t * total) {
    LOOM_REQUIRE(free != nullptr && total != nullptr, "NULL free or total");
    loom::vk::Device * d = device >= 0 ? vk_reg().at(size_t(device)) : nullptr;
    if (d == nullptr) {
        *free  = 0;
        *total = 0;
        return;
    }
    d->memory(free, total);
}

ggml_backend_buffer_type_t ggml_backend_vk_buffer_type(size_t dev_num) {
    loom::vk::Device * d = vk_reg().at(dev_num);
    return d != nullptr ? d->buffer_type() : nullptr;
}

ggml_backend_buffer_type_t ggml_backend_vk_host_buffer_type(void) {
    loom::vk::Device * d = vk_reg().at(0);
    return d != nullptr ? d->host_buffer_type() : nullptr;
}

} // extern "C"
