// The plugin's reg and devices as loom objects, and the functions of the
// plugin loom offers through get_proc_address.

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/common.h"
#include "hosted.h"
#include "shadow.h"

namespace loom::ggml_plugin {

namespace {

// ggml's RPC plugin registers a server through the function its reg offers,
// ggml_backend_rpc_add_server(endpoint), which returns a reg of the
// plugin's for that server (with its devices) for the caller to register.
// The function loom offers in its place takes no handle to find the plugin
// by: the reg that offered it last is the one it calls.
std::atomic<const HostedReg *> g_rpc_plugin{nullptr};

// ggml's plugin aborts the process when it cannot parse the endpoint, reach
// the server or agree with it on the protocol. Asked first here, those end
// in an error instead: the endpoint must read as ggml's client reads it
// (host, the first ':', a port), and where loom has its own client of the
// protocol (its RPC family, asked through the registry) the server must
// answer its HELLO (one connection, closed again).
bool rpc_server_usable(const char * endpoint) {
    const char * colon = std::strchr(endpoint, ':');
    char *       end   = nullptr;
    const long   port  = colon != nullptr ? std::strtol(colon + 1, &end, 10) : 0;
    if (colon == nullptr || colon == endpoint || end == colon + 1 || *end != '\0' || port <= 0 || port > 65535) {
        LOOM_LOG_ERROR("ggml_backend_rpc_add_server: '%s' is not HOST:PORT\n", endpoint);
        return false;
    }
    using SpeaksFn           = bool (*)(const char *, int);
    ggml_backend_reg_t loom = ggml_backend_reg_by_name("RPC");
    auto speaks = loom != nullptr ? reinterpret_cast<SpeaksFn>(ggml_backend_reg_get_proc_address(loom, "loom_rpc_speaks_ggml"))
                                  : nullptr;
    if (speaks != nullptr && !speaks(endpoint, 10000)) {
        LOOM_LOG_ERROR("ggml_backend_rpc_add_server: no server of ggml's RPC protocol 7 answers at %s\n", endpoint);
        return false;
    }
    return true;
}

ggml_backend_reg_t rpc_add_server(const char * endpoint) {
    using Fn                  = ggml_abi::Reg * (*) (const char *);
    const HostedReg * plugin = g_rpc_plugin.load();
    if (plugin == nullptr || endpoint == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_rpc_add_server: %s\n", endpoint == nullptr ? "NULL endpoint" : "no RPC plugin is hosted");
        return nullptr;
    }
    if (!rpc_server_usable(endpoint)) {
        return nullptr;
    }
    ggml_abi::Reg * reg = reinterpret_cast<Fn>(plugin->foreign_proc("ggml_backend_rpc_add_server"))(endpoint);
    if (reg == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_rpc_add_server: the plugin %s found no device at %s\n", plugin->name(), endpoint);
        return nullptr;
    }
    if (reg->api_version != ggml_abi::k_api_version) {
        LOOM_LOG_ERROR("ggml_backend_rpc_add_server: the plugin's reg for %s has API version %d, not %d\n", endpoint,
                       reg->api_version, ggml_abi::k_api_version);
        return nullptr;
    }
    // Registered as ggml's own function leaves it to the caller, which
    // does no harm done twice; loom's RPC family registers its regs itself.
    HostedReg * hosted = plugin->adopt(reg);
    ggml_backend_register(hosted);
    return hosted;
}

// Each function below takes loom's handle, finds the plugin's object behind
// it and calls the plugin's function of the same name (Note [Foreign handles]).

void set_n_threads(ggml_backend_t backend, int n_threads) {
    auto * hosted = dynamic_cast<HostedBackend *>(backend);
    if (hosted == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_set_n_threads: backend %s is not hosted by a ggml plugin\n",
                       ggml_backend_name(backend));
        return;
    }
    auto fn = reinterpret_cast<ggml_abi::SetNThreadsFn>(hosted->hosted_reg().foreign_proc("ggml_backend_set_n_threads"));
    fn(hosted->foreign(), n_threads);
}

void set_abort_callback(ggml_backend_t backend, ggml_abort_callback callback, void * data) {
    auto * hosted = dynamic_cast<HostedBackend *>(backend);
    if (hosted == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_set_abort_callback: backend %s is not hosted by a ggml plugin\n",
                       ggml_backend_name(backend));
        return;
    }
    auto fn = reinterpret_cast<ggml_abi::SetAbortFn>(hosted->hosted_reg().foreign_proc("ggml_backend_set_abort_callback"));
    fn(hosted->foreign(), callback, data);
}

ggml_backend_buffer_type_t * get_extra_bufts(ggml_backend_dev_t device) {
    auto * hosted = dynamic_cast<HostedDevice *>(device);
    if (hosted == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_dev_get_extra_bufts: device %s is not hosted by a ggml plugin\n",
                       ggml_backend_dev_name(device));
        static ggml_backend_buffer_type_t none[] = {nullptr};
        return none;
    }
    return hosted->extra_bufts();
}

// The features are strings of the plugin's: nothing to translate but the reg.
ggml_backend_feature * get_features(ggml_backend_reg_t reg) {
    using Fn     = ggml_backend_feature * (*) (ggml_abi::Reg *);
    auto * hosted = dynamic_cast<HostedReg *>(reg);
    if (hosted == nullptr) {
        static ggml_backend_feature none[] = {{nullptr, nullptr}};
        return none;
    }
    return reinterpret_cast<Fn>(hosted->foreign_proc("ggml_backend_get_features"))(hosted->foreign());
}

struct Offered {
    const char * name;
    void *       fn;
};

const Offered k_offered[] = {
    {"ggml_backend_set_n_threads", reinterpret_cast<void *>(&set_n_threads)},
    {"ggml_backend_set_abort_callback", reinterpret_cast<void *>(&set_abort_callback)},
    {"ggml_backend_dev_get_extra_bufts", reinterpret_cast<void *>(&get_extra_bufts)},
    {"ggml_backend_get_features", reinterpret_cast<void *>(&get_features)},
    {"ggml_backend_rpc_add_server", reinterpret_cast<void *>(&rpc_add_server)},
};

} // namespace

HostedReg::HostedReg(PluginLibraries libs, ggml_abi::Reg * reg, ggml_abi::BufferFreeFn buffer_free)
    : libs_(libs), reg_(reg), buffer_free_(buffer_free), name_(std::string("ggml:") + reg->iface.get_name(reg)) {
    const size_t n = reg->iface.get_device_count(reg);
    for (size_t i = 0; i < n; ++i) {
        devices_.push_back(std::make_unique<HostedDevice>(this, reg->iface.get_device(reg, i)));
    }
}

HostedReg * HostedReg::of(PluginLibraries libs, ggml_abi::Reg * reg, ggml_abi::BufferFreeFn buffer_free, bool * fresh) {
    static std::mutex                                          mutex;
    static std::map<ggml_abi::Reg *, std::unique_ptr<HostedReg>> hosted;
    std::lock_guard<std::mutex>                                lock(mutex);
    std::unique_ptr<HostedReg> &                               slot = hosted[reg];
    if (fresh != nullptr) {
        *fresh = slot == nullptr;
    }
    if (slot == nullptr) {
        slot = std::make_unique<HostedReg>(libs, reg, buffer_free);
    }
    return slot.get();
}

// The libraries stay open: the plugin may have left threads or buffers
// behind (as loom's own plugins, Registry::~Registry).
HostedReg::~HostedReg() = default;

ggml_backend_device * HostedReg::device(size_t index) {
    return index < devices_.size() ? devices_[index].get() : nullptr;
}

void * HostedReg::foreign_proc(const char * fn_name) const {
    return reg_->iface.get_proc_address != nullptr ? reg_->iface.get_proc_address(reg_, fn_name) : nullptr;
}

void * HostedReg::proc_address(const char * fn_name) {
    for (const Offered & o : k_offered) {
        if (std::strcmp(o.name, fn_name) == 0) {
            if (foreign_proc(fn_name) == nullptr) {
                return nullptr;
            }
            if (o.fn == reinterpret_cast<void *>(&rpc_add_server)) {
                g_rpc_plugin.store(this);
            }
            return o.fn;
        }
    }
    return nullptr;
}

HostedBufferType * HostedReg::wrap(ggml_abi::BufferType * buft, HostedDevice * from) {
    if (buft == nullptr) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<HostedBufferType> & slot = bufts_[buft];
    if (slot == nullptr) {
        HostedDevice * dev = device_of(buft->device);
        slot               = std::make_unique<HostedBufferType>(this, buft, dev != nullptr ? dev : from);
    }
    return slot.get();
}

HostedDevice * HostedReg::device_of(const ggml_abi::Device * dev) const {
    for (const auto & d : devices_) {
        if (d->foreign() == dev) {
            return d.get();
        }
    }
    return nullptr;
}

HostedDevice::HostedDevice(HostedReg * reg, ggml_abi::Device * dev)
    : ggml_backend_device(reg), hreg_(reg), dev_(dev), name_(std::string("ggml:") + dev->iface.get_name(dev)) {}

const char * HostedDevice::description() const {
    return dev_->iface.get_description(dev_);
}

void HostedDevice::memory(size_t * free, size_t * total) const {
    dev_->iface.get_memory(dev_, free, total);
}

enum ggml_backend_dev_type HostedDevice::type() const {
    return dev_->iface.get_type(dev_);
}

ggml_backend_dev_props HostedDevice::props() const {
    ggml_backend_dev_props p{};
    dev_->iface.get_props(dev_, &p);
    return p;
}

ggml_backend_dev_caps HostedDevice::caps() const {
    return props().caps;
}

const char * HostedDevice::device_id() const {
    return props().device_id;
}

ggml_backend * HostedDevice::init_backend(const char * params) {
    ggml_abi::Backend * b = dev_->iface.init_backend(dev_, params);
    if (b == nullptr) {
        LOOM_LOG_ERROR("%s: the plugin could not create a backend\n", name());
        return nullptr;
    }
    return new HostedBackend(this, b);
}

ggml_backend_buffer_type * HostedDevice::buffer_type() {
    return hreg_->wrap(dev_->iface.get_buffer_type(dev_), this);
}

ggml_backend_buffer_type * HostedDevice::host_buffer_type() {
    return dev_->iface.get_host_buffer_type != nullptr ? hreg_->wrap(dev_->iface.get_host_buffer_type(dev_), this)
                                                       : nullptr;
}

ggml_backend_buffer * HostedDevice::buffer_from_host_ptr(void * ptr, size_t size, size_t max_tensor_size) {
    if (dev_->iface.buffer_from_host_ptr == nullptr) {
        return nullptr;
    }
    ggml_abi::Buffer * b = dev_->iface.buffer_from_host_ptr(dev_, ptr, size, max_tensor_size);
    return b != nullptr ? new HostedBuffer(hreg_->wrap(b->buft, this), b, b->size) : nullptr;
}

bool HostedDevice::supports_op(const ggml_tensor * op) const {
    TensorShadow s(op, *hreg_, true);
    return dev_->iface.supports_op(dev_, s.get());
}

bool HostedDevice::supports_buft(const ggml_backend_buffer_type * buft) const {
    const auto * hosted = dynamic_cast<const HostedBufferType *>(buft);
    return hosted != nullptr && &hosted->hosted_reg() == hreg_ && dev_->iface.supports_buft(dev_, hosted->foreign());
}

bool HostedDevice::offload_op(const ggml_tensor * op) const {
    if (dev_->iface.offload_op == nullptr) {
        return false;
    }
    TensorShadow s(op, *hreg_, true);
    return dev_->iface.offload_op(dev_, s.get());
}

ggml_backend_event * HostedDevice::event_new() {
    if (dev_->iface.event_new == nullptr) {
        return nullptr;
    }
    ggml_abi::Event * e = dev_->iface.event_new(dev_);
    return e != nullptr ? new HostedEvent(this, e) : nullptr;
}

void HostedDevice::event_synchronize(ggml_backend_event * event) {
    auto * hosted = dynamic_cast<HostedEvent *>(event);
    if (hosted != nullptr && dev_->iface.event_synchronize != nullptr) {
        dev_->iface.event_synchronize(dev_, hosted->foreign());
    }
}

ggml_backend_buffer_type ** HostedDevice::extra_bufts() {
    std::lock_guard<std::mutex> lock(extra_mutex_);
    if (extra_.empty()) {
        auto fn = reinterpret_cast<ggml_abi::ExtraBuftsFn>(hreg_->foreign_proc("ggml_backend_dev_get_extra_bufts"));
        if (fn != nullptr) {
            for (ggml_abi::BufferType ** b = fn(dev_); b != nullptr && *b != nullptr; ++b) {
                extra_.push_back(hreg_->wrap(*b, this));
            }
        }
        extra_.push_back(nullptr);
    }
    return extra_.data();
}

} // namespace loom::ggml_plugin
