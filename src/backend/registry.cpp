// The process-wide registry of backend families and their devices.

#include <mutex>
#include <strings.h>
#include <vector>

#include "backend_impl.h"
#include "core/common.h"
#include "ggml-cpu.h"

namespace {

class Registry {
  public:
    static Registry & get() {
        static Registry r;
        return r;
    }

    void add_reg(ggml_backend_reg * reg) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (ggml_backend_reg * r : regs_) {
            if (r == reg) {
                return;
            }
        }
        regs_.push_back(reg);
        for (size_t i = 0; i < reg->device_count(); ++i) {
            devs_.push_back(reg->device(i));
        }
    }

    void add_dev(ggml_backend_device * dev) {
        std::lock_guard<std::mutex> lock(mutex_);
        devs_.push_back(dev);
    }

    std::vector<ggml_backend_reg *> regs() {
        std::lock_guard<std::mutex> lock(mutex_);
        return regs_;
    }
    std::vector<ggml_backend_device *> devs() {
        std::lock_guard<std::mutex> lock(mutex_);
        return devs_;
    }

  private:
    Registry() {
        // Built-in backend families, in order of preference.
        regs_.push_back(ggml_backend_cpu_reg());
        for (size_t i = 0; i < regs_.back()->device_count(); ++i) {
            devs_.push_back(regs_.back()->device(i));
        }
    }

    std::mutex                         mutex_;
    std::vector<ggml_backend_reg *>    regs_;
    std::vector<ggml_backend_device *> devs_;
};

bool same_name(const char * a, const char * b) {
    return a != nullptr && b != nullptr && strcasecmp(a, b) == 0;
}

} // namespace

extern "C" {

void ggml_backend_register(ggml_backend_reg_t reg) {
    LOOM_REQUIRE(reg != nullptr, "NULL reg");
    Registry::get().add_reg(reg);
}

void ggml_backend_device_register(ggml_backend_dev_t device) {
    LOOM_REQUIRE(device != nullptr, "NULL device");
    Registry::get().add_dev(device);
}

size_t ggml_backend_reg_count(void) {
    return Registry::get().regs().size();
}

ggml_backend_reg_t ggml_backend_reg_get(size_t index) {
    const auto regs = Registry::get().regs();
    LOOM_REQUIRE(index < regs.size(), "index %zu out of range (%zu regs)", index, regs.size());
    return regs[index];
}

ggml_backend_reg_t ggml_backend_reg_by_name(const char * name) {
    for (ggml_backend_reg * reg : Registry::get().regs()) {
        if (same_name(reg->name(), name)) {
            return reg;
        }
    }
    return nullptr;
}

size_t ggml_backend_dev_count(void) {
    return Registry::get().devs().size();
}

ggml_backend_dev_t ggml_backend_dev_get(size_t index) {
    const auto devs = Registry::get().devs();
    LOOM_REQUIRE(index < devs.size(), "index %zu out of range (%zu devices)", index, devs.size());
    return devs[index];
}

ggml_backend_dev_t ggml_backend_dev_by_name(const char * name) {
    for (ggml_backend_device * dev : Registry::get().devs()) {
        if (same_name(dev->name(), name)) {
            return dev;
        }
    }
    return nullptr;
}

ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type) {
    for (ggml_backend_device * dev : Registry::get().devs()) {
        if (dev->type() == type) {
            return dev;
        }
    }
    return nullptr;
}

ggml_backend_t ggml_backend_init_by_name(const char * name, const char * params) {
    ggml_backend_device * dev = ggml_backend_dev_by_name(name);
    if (dev == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_init_by_name: no device named '%s'\n", name ? name : "(null)");
        return nullptr;
    }
    return dev->init_backend(params);
}

ggml_backend_t ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params) {
    ggml_backend_device * dev = ggml_backend_dev_by_type(type);
    return dev != nullptr ? dev->init_backend(params) : nullptr;
}

ggml_backend_t ggml_backend_init_best(void) {
    for (enum ggml_backend_dev_type type :
         {GGML_BACKEND_DEVICE_TYPE_GPU, GGML_BACKEND_DEVICE_TYPE_IGPU, GGML_BACKEND_DEVICE_TYPE_CPU}) {
        if (ggml_backend_device * dev = ggml_backend_dev_by_type(type)) {
            return dev->init_backend(nullptr);
        }
    }
    return nullptr;
}

} // extern "C"
