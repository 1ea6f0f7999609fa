// The test device plugin: buffers, device, reg and the plugin entry points.

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "ggml-cpu.h"
#include "testdev_api.h"
#include "testdev_impl.h"

namespace testdev {

// The collective operations are offered only after "comm" is configured.
std::atomic<bool> g_comm_enabled{false};

namespace {

void vlog(ggml_log_level level, const char * fmt, va_list args) {
    ggml_log_callback cb = nullptr;
    void *            ud = nullptr;
    ggml_log_get(&cb, &ud);
    char text[512];
    std::vsnprintf(text, sizeof(text), fmt, args);
    if (cb != nullptr) {
        cb(level, text, ud);
    }
}

// Fake device addresses: far outside any mapping (and not even canonical on
// x86-64), so a stray host access to device memory faults at once.
constexpr uintptr_t k_address_space = uintptr_t(0x5) << 60;
constexpr uintptr_t k_buffer_span   = uintptr_t(1) << 40;
std::atomic<uintptr_t> g_next_buffer{0};

const char * tensor_name(const ggml_tensor * t) {
    return t->name[0] != '\0' ? t->name : "(unnamed)";
}

} // namespace

void log(ggml_log_level level, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vlog(level, fmt, args);
    va_end(args);
}

void fail(const char * func, const char * fmt, ...) {
    char    text[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    ggml_abort(__FILE__, __LINE__, "%s: %s", func, text);
}

// ---- op sets ---------------------------------------------------------------

bool OpSet::parse(const char * list, OpSet * out) {
    OpSet       set;
    std::string all(list);
    size_t      start = 0;
    while (start <= all.size()) {
        size_t end = all.find(',', start);
        if (end == std::string::npos) {
            end = all.size();
        }
        std::string name = all.substr(start, end - start);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::toupper(c)); });
        if (name == "*") {
            set.all = true;
        } else if (!name.empty()) {
            bool known = name == "UNARY";
            for (int op = 0; op < GGML_OP_COUNT && !known; ++op) {
                known = name == ggml_op_name(ggml_op(op));
            }
            for (int op = 0; op < GGML_UNARY_OP_COUNT && !known; ++op) {
                known = name == ggml_unary_op_name(ggml_unary_op(op));
            }
            if (!known) {
                log(GGML_LOG_LEVEL_ERROR, "testdev: unknown op name '%s'\n", name.c_str());
                return false;
            }
            set.names_.insert(name);
        }
        start = end + 1;
    }
    *out = std::move(set);
    return true;
}

bool OpSet::contains(const ggml_tensor * op) const {
    if (all || names_.count(ggml_op_desc(op)) > 0) {
        return true;
    }
    return op->op == GGML_OP_UNARY && names_.count("UNARY") > 0;
}

// ---- buffers ---------------------------------------------------------------

BufferType::BufferType(Device * dev) : ggml_backend_buffer_type(dev) {}

const char * BufferType::name() const {
    return device->name();
}

size_t BufferType::max_size() const {
    return static_cast<Device *>(device)->settings().max_buffer_size;
}

size_t BufferType::alloc_size(const ggml_tensor * t) const {
    const size_t block = 256;
    return (ggml_nbytes(t) + block - 1) / block * block;
}

ggml_backend_buffer * BufferType::alloc_buffer(size_t size) {
    auto * dev = static_cast<Device *>(device);
    if (size > max_size()) {
        log(GGML_LOG_LEVEL_ERROR, "%s: a buffer of %zu bytes exceeds the maximum of %zu\n", name(), size,
            max_size());
        return nullptr;
    }
    if (!dev->take_memory(size)) {
        log(GGML_LOG_LEVEL_ERROR, "%s: out of device memory for a buffer of %zu bytes\n", name(), size);
        return nullptr;
    }
    try {
        return new Buffer(this, size);
    } catch (const std::bad_alloc &) {
        dev->give_back_memory(size);
        log(GGML_LOG_LEVEL_ERROR, "%s: out of host memory for a buffer of %zu bytes\n", name(), size);
        return nullptr;
    }
}

Buffer::Buffer(BufferType * type, size_t size)
    : ggml_backend_buffer(type, size),
      base_(k_address_space + (g_next_buffer.fetch_add(1) % 1024) * k_buffer_span), storage_(size) {}

Buffer::~Buffer() {
    device()->give_back_memory(size);
}

Device * Buffer::device() const {
    return static_cast<Device *>(buft->device);
}

uint8_t * Buffer::host_address(const void * device_address, size_t n) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(device_address);
    if (a < base_ || a - base_ > storage_.size() || n > storage_.size() - (a - base_)) {
        return nullptr;
    }
    return storage_.data() + (a - base_);
}

// The C API checked offset and n against the tensor; what remains to check
// is that the tensor really lies in this buffer.
void Buffer::write(void * device_address, const void * data, size_t n) {
    uint8_t * p = host_address(device_address, n);
    if (p == nullptr) {
        fail(__func__, "%zu bytes at %p are not inside buffer %s", n, device_address, buft->name());
    }
    std::memcpy(p, data, n);
}

void Buffer::read(const void * device_address, void * data, size_t n) {
    const uint8_t * p = host_address(device_address, n);
    if (p == nullptr) {
        fail(__func__, "%zu bytes at %p are not inside buffer %s", n, device_address, buft->name());
    }
    std::memcpy(data, p, n);
}

namespace {

std::atomic<size_t> g_init_tensors{0};

size_t init_tensors() {
    return g_init_tensors.load();
}

} // namespace

ggml_status Buffer::init_tensor(ggml_tensor * t) {
    if (t->view_src != nullptr) {
        return GGML_STATUS_SUCCESS; // the source's memory, initialised with the source
    }
    const size_t n      = ggml_nbytes(t);
    const size_t padded = buft->alloc_size(t);
    if (padded > n) {
        uint8_t * p = host_address(static_cast<char *>(t->data) + n, padded - n);
        if (p == nullptr) {
            fail(__func__, "the %zu bytes of padding of tensor %s are not inside buffer %s", padded - n,
                 tensor_name(t), buft->name());
        }
        std::memset(p, 0, padded - n);
    }
    ++g_init_tensors;
    if (device()->settings().set_extra) {
        t->extra = static_cast<ggml_backend_device *>(device());
    }
    return GGML_STATUS_SUCCESS;
}

void Buffer::set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    write(static_cast<char *>(t->data) + offset, data, n);
}

void Buffer::get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    read(static_cast<const char *>(t->data) + offset, data, n);
}

void Buffer::memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    uint8_t * p = host_address(static_cast<char *>(t->data) + offset, n);
    if (p == nullptr) {
        fail(__func__, "tensor %s is not inside buffer %s", tensor_name(t), buft->name());
    }
    std::memset(p, value, n);
}

// Copies within one device only: like a GPU without peer access, a copy
// from another device is left to the caller, who stages it through the host.
bool Buffer::cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) {
    Buffer * from = buffer_of(src);
    if (from == nullptr || from->device() != device()) {
        return false;
    }
    const size_t    n = ggml_nbytes(src);
    const uint8_t * s = from->host_address(src->data, n);
    uint8_t *       d = host_address(dst->data, n);
    if (s == nullptr || d == nullptr) {
        fail(__func__, "tensor %s or %s is not inside its buffer", tensor_name(src), tensor_name(dst));
    }
    std::memmove(d, s, n);
    return true;
}

void Buffer::clear(uint8_t value) {
    std::fill(storage_.begin(), storage_.end(), value);
}

Buffer * buffer_of(const ggml_tensor * t) {
    ggml_backend_buffer * b = t->view_src != nullptr ? t->view_src->buffer : t->buffer;
    return b != nullptr ? dynamic_cast<Buffer *>(b) : nullptr;
}

// ---- events ----------------------------------------------------------------

uint64_t Event::next_point() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++recorded_;
}

uint64_t Event::last_point() {
    std::lock_guard<std::mutex> lock(mutex_);
    return recorded_;
}

void Event::mark_done(uint64_t point) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = std::max(done_, point);
    }
    cv_.notify_all();
}

void Event::wait_for(uint64_t point) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_ >= point; });
}

// ---- the device ------------------------------------------------------------

Device::Device(ggml_backend_reg * reg, int index)
    : ggml_backend_device(reg), name_("TestDev" + std::to_string(index)),
      description_("loom test device " + std::to_string(index) + " (memory behind the buffer interface)"),
      buft_(this) {}

void Device::memory(size_t * free, size_t * total) const {
    const size_t mem  = settings().memory;
    const size_t used = used_.load();
    *total            = mem;
    *free             = used < mem ? mem - used : 0;
}

ggml_backend_dev_caps Device::caps() const {
    ggml_backend_dev_caps c{};
    c.async                = true;
    c.host_buffer          = false;
    c.buffer_from_host_ptr = false;
    c.events               = true;
    c.mmap_support         = true;
    return c;
}

ggml_backend * Device::init_backend(const char * params) {
    (void) params;
    try {
        return new Backend(this);
    } catch (const std::exception & e) {
        log(GGML_LOG_LEVEL_ERROR, "%s: cannot start a backend: %s\n", name(), e.what());
        return nullptr;
    }
}

bool Device::supports_op(const ggml_tensor * op) const {
    switch (op->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return true;
        default: break;
    }
    if (!settings().ops.contains(op)) {
        return false;
    }
    // Whether the kernels compute the op; where its operands live is
    // supports_buft's business (graph_compute refuses operands in other
    // memory, and the scheduler copies them here first).
    return ggml_backend_dev_supports_op(ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0), op);
}

bool Device::offload_op(const ggml_tensor * op) const {
    return settings().offload_ops.contains(op);
}

ggml_backend_event * Device::event_new() {
    return new (std::nothrow) Event(this);
}

void Device::event_synchronize(ggml_backend_event * event) {
    auto * e = static_cast<Event *>(event);
    e->wait_for(e->last_point());
}

Settings Device::settings() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return settings_;
}

bool Device::configure(const char * key, const char * value) {
    if (key == nullptr || value == nullptr) {
        log(GGML_LOG_LEVEL_ERROR, "%s: NULL configuration key or value\n", name());
        return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::strcmp(key, "reset") == 0) {
        settings_      = Settings::defaults();
        g_comm_enabled = false;
        return true;
    }
    if (std::strcmp(key, "extra") == 0) {
        settings_.set_extra = std::strcmp(value, "0") != 0;
        return true;
    }
    if (std::strcmp(key, "comm") == 0) {
        g_comm_enabled = std::strcmp(value, "0") != 0;
        return true;
    }
    if (std::strcmp(key, "ops") == 0) {
        return OpSet::parse(value, &settings_.ops);
    }
    if (std::strcmp(key, "offload_ops") == 0) {
        return OpSet::parse(value, &settings_.offload_ops);
    }
    const bool is_max_size = std::strcmp(key, "max_buffer_size") == 0;
    if (is_max_size || std::strcmp(key, "memory") == 0) {
        char *                   end   = nullptr;
        const unsigned long long bytes = std::strtoull(value, &end, 10);
        if (end == value || *end != '\0' || value[0] == '-') {
            log(GGML_LOG_LEVEL_ERROR, "%s: '%s' is not a number of bytes for %s\n", name(), value, key);
            return false;
        }
        if (is_max_size) {
            settings_.max_buffer_size = bytes == 0 ? SIZE_MAX : size_t(bytes);
        } else {
            settings_.memory = size_t(bytes);
        }
        return true;
    }
    log(GGML_LOG_LEVEL_ERROR, "%s: unknown configuration key '%s'\n", name(), key);
    return false;
}

void Device::record_graph(const ggml_cgraph * graph) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_uid_ = graph->uid;
    last_nodes_.assign(graph->nodes, graph->nodes + graph->n_nodes);
    last_use_counts_.clear();
    const loom::TensorHashSet & set = graph->visited_hash_set;
    for (const ggml_tensor * node : last_nodes_) {
        const size_t slot = set.find(node);
        last_use_counts_.push_back(slot != loom::TensorHashSet::npos && set.is_used(slot) ? graph->use_counts[slot] : 0);
    }
}

size_t Device::last_graph(uint64_t * uid, ggml_tensor ** nodes, int32_t * use_counts, size_t capacity) const {
    std::lock_guard<std::mutex> lock(mutex_);
    *uid = last_uid_;
    for (size_t i = 0; i < last_nodes_.size() && i < capacity; ++i) {
        nodes[i]      = last_nodes_[i];
        use_counts[i] = last_use_counts_[i];
    }
    return last_nodes_.size();
}

bool Device::take_memory(size_t size) {
    const size_t limit = settings().memory;
    size_t       used  = used_.load();
    do {
        if (size > limit || used > limit - size) {
            return false;
        }
    } while (!used_.compare_exchange_weak(used, used + size));
    return true;
}

void Device::give_back_memory(size_t size) {
    used_.fetch_sub(size);
}

// ---- collective operations (the meta backend's ggml_backend_comm_*) ------

namespace {

std::atomic<size_t> g_comm_allreduces{0};

struct Comm {
    size_t                      n_backends = 0;
    std::vector<ggml_backend_t> backends;
};

void * comm_init(ggml_backend_t * backends, size_t n_backends) {
    return new Comm{n_backends, std::vector<ggml_backend_t>(backends, backends + n_backends)};
}

void comm_free(void * ctx) {
    delete static_cast<Comm *>(ctx);
}

// Sums F32 tensors through the host, as a device library would over its
// links. The meta backend orders a reduction in the members' streams, as it
// orders a computation: the work before it is waited for here.
bool comm_allreduce(void * ctx, ggml_tensor ** tensors) {
    const Comm & c = *static_cast<Comm *>(ctx);
    if (c.n_backends == 0 || tensors[0]->type != GGML_TYPE_F32) return false;
    for (ggml_backend_t b : c.backends) ggml_backend_synchronize(b);
    const size_t       n = size_t(ggml_nelements(tensors[0]));
    std::vector<float> sum(n, 0.0f), part(n);
    for (size_t j = 0; j < c.n_backends; ++j) {
        ggml_backend_tensor_get(tensors[j], part.data(), 0, n * sizeof(float));
        for (size_t i = 0; i < n; ++i) sum[i] += part[i];
    }
    for (size_t j = 0; j < c.n_backends; ++j) ggml_backend_tensor_set(tensors[j], sum.data(), 0, n * sizeof(float));
    ++g_comm_allreduces;
    return true;
}

size_t comm_allreduces() {
    return g_comm_allreduces.load();
}

} // namespace

// ---- the reg ---------------------------------------------------------------

namespace {

class Reg final : public ggml_backend_reg {
  public:
    Reg() : devices_{Device(this, 0), Device(this, 1)} {}

    const char *          name() const override { return "TestDev"; }
    size_t                device_count() const override { return 2; }
    ggml_backend_device * device(size_t index) override { return &devices_[index]; }
    void *                proc_address(const char * fn) override {
        if (std::strcmp(fn, "loom_testdev_configure") == 0) {
            return reinterpret_cast<void *>(&configure);
        }
        if (std::strcmp(fn, "loom_testdev_comm_allreduces") == 0) {
            return reinterpret_cast<void *>(&comm_allreduces);
        }
        if (std::strcmp(fn, "loom_testdev_init_tensors") == 0) {
            return reinterpret_cast<void *>(&init_tensors);
        }
        if (std::strcmp(fn, "loom_testdev_last_graph") == 0) {
            return reinterpret_cast<void *>(&last_graph);
        }
        if (g_comm_enabled) {
            if (std::strcmp(fn, "ggml_backend_comm_init") == 0) return reinterpret_cast<void *>(&comm_init);
            if (std::strcmp(fn, "ggml_backend_comm_free") == 0) return reinterpret_cast<void *>(&comm_free);
            if (std::strcmp(fn, "ggml_backend_comm_allreduce_tensor") == 0) {
                return reinterpret_cast<void *>(&comm_allreduce);
            }
        }
        return nullptr;
    }

  private:
    static bool configure(ggml_backend_dev_t dev, const char * key, const char * value);
    static size_t last_graph(ggml_backend_dev_t dev, uint64_t * uid, ggml_tensor ** nodes, int32_t * use_counts,
                             size_t capacity);

    Device devices_[2];
};

Reg & the_reg() {
    static Reg reg;
    return reg;
}

bool Reg::configure(ggml_backend_dev_t dev, const char * key, const char * value) {
    Reg & reg = the_reg();
    for (Device & d : reg.devices_) {
        if (&d == dev) {
            return d.configure(key, value);
        }
    }
    log(GGML_LOG_LEVEL_ERROR, "loom_testdev_configure: %p is not a test device\n", static_cast<void *>(dev));
    return false;
}

size_t Reg::last_graph(ggml_backend_dev_t dev, uint64_t * uid, ggml_tensor ** nodes, int32_t * use_counts,
                       size_t capacity) {
    for (Device & d : the_reg().devices_) {
        if (&d == dev) {
            return d.last_graph(uid, nodes, use_counts, capacity);
        }
    }
    *uid = 0;
    return 0;
}

} // namespace

} // namespace testdev

extern "C" {

__attribute__((visibility("default"))) int loom_backend_api_version(void) {
    return LOOM_BACKEND_API_VERSION;
}

__attribute__((visibility("default"))) ggml_backend_reg_t ggml_backend_init(void) {
    return &testdev::the_reg();
}

} // extern "C"
