// The process-wide registry of backend families and their devices.

#include "registry.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <strings.h>
#include <utility>

#include "core/common.h"

namespace loom {

Registry & Registry::get() {
    static Registry r;
    // After r exists, once: what the environment adds registers through
    // get() again, which on that thread then returns r at once; other
    // threads wait until it is added.
    static std::atomic<bool>    environment_added{false};
    static std::recursive_mutex environment_mutex;
    static bool                 environment_started = false;
    if (!environment_added.load(std::memory_order_acquire)) {
        std::lock_guard<std::recursive_mutex> lock(environment_mutex);
        if (!environment_started) {
            environment_started = true;
            builtin_from_environment();
            environment_added.store(true, std::memory_order_release);
        }
    }
    return r;
}

Registry::Registry() {
    for (ggml_backend_reg * reg : builtin_regs()) {
        add_locked(reg, SharedLibrary());
    }
}

Registry::~Registry() {
    // Plugin libraries stay mapped until the process ends: objects of theirs
    // (a backend's threads, a buffer freed by a static destructor) may still
    // be in use while static objects are destroyed.
    for (Entry & e : entries_) {
        e.library.release();
    }
}

void Registry::add_locked(ggml_backend_reg * reg, SharedLibrary library) {
    entries_.push_back({reg, std::move(library)});
    for (size_t i = 0; i < reg->device_count(); ++i) {
        ggml_backend_device * dev = reg->device(i);
        if (std::find(devs_.begin(), devs_.end(), dev) == devs_.end()) {
            devs_.push_back(dev);
        }
    }
}

void Registry::add_reg(ggml_backend_reg * reg) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry & e : entries_) {
        if (e.reg == reg) {
            return;
        }
    }
    add_locked(reg, SharedLibrary());
}

Registry::AddResult Registry::add_loaded(ggml_backend_reg * reg, SharedLibrary & library) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry & e : entries_) {
        if (e.reg == reg) {
            return AddResult::already_present;
        }
        if (strcasecmp(e.reg->name(), reg->name()) == 0) {
            return AddResult::name_taken;
        }
    }
    add_locked(reg, std::move(library));
    return AddResult::added;
}

void Registry::add_dev(ggml_backend_device * dev) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(devs_.begin(), devs_.end(), dev) == devs_.end()) {
        devs_.push_back(dev);
    }
}

bool Registry::remove(ggml_backend_reg * reg, SharedLibrary * library) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [reg](const Entry & e) { return e.reg == reg; });
    if (it == entries_.end()) {
        return false;
    }
    std::erase_if(devs_, [reg](const ggml_backend_device * d) { return d->reg == reg; });
    *library = std::move(it->library);
    entries_.erase(it);
    return true;
}

std::vector<ggml_backend_reg *> Registry::regs() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ggml_backend_reg *> out;
    out.reserve(entries_.size());
    for (const Entry & e : entries_) {
        out.push_back(e.reg);
    }
    return out;
}

std::vector<ggml_backend_device *> Registry::devs() {
    std::lock_guard<std::mutex> lock(mutex_);
    return devs_;
}

} // namespace loom

namespace {

using loom::Registry;

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
