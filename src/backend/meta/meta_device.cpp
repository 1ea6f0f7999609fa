// The meta device and its buffer type, and ggml_backend_meta_device.

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "core/common.h"
#include "meta.h"

namespace loom::meta {

namespace {
std::string joined(const std::vector<ggml_backend_device *> & devs, const char * (*get)(ggml_backend_dev_t)) {
    std::string s = "Meta(";
    for (size_t i = 0; i < devs.size(); ++i) {
        if (i > 0) s += ",";
        s += get(devs[i]);
    }
    return s + ")";
}

std::vector<ggml_backend_buffer_type *> member_bufts(const std::vector<ggml_backend_device *> & devs) {
    std::vector<ggml_backend_buffer_type *> out;
    for (ggml_backend_device * d : devs) out.push_back(d->buffer_type());
    return out;
}
} // namespace

BufferType::BufferType(Device * dev, std::vector<ggml_backend_buffer_type *> members)
    : ggml_backend_buffer_type(dev), members_(std::move(members)) {
    name_ = "Meta(";
    for (size_t i = 0; i < members_.size(); ++i) {
        if (i > 0) name_ += ",";
        name_ += members_[i]->name();
    }
    name_ += ")";
}

ggml_backend_buffer * BufferType::alloc_buffer(size_t size) {
    std::vector<ggml_backend_buffer *> bufs;
    for (ggml_backend_buffer_type * m : members_) {
        ggml_backend_buffer * b = m->alloc_buffer(size);
        if (b == nullptr) {
            LOOM_LOG_ERROR("%s: member buffer type %s cannot allocate %zu bytes\n", name(), m->name(), size);
            for (ggml_backend_buffer * o : bufs) ggml_backend_buffer_free(o);
            return nullptr;
        }
        bufs.push_back(b);
    }
    return new Buffer(this, size, std::move(bufs));
}

size_t BufferType::alignment() const {
    size_t a = 1;
    for (ggml_backend_buffer_type * m : members_) a = std::max(a, m->alignment());
    return a;
}

size_t BufferType::max_size() const {
    size_t s = SIZE_MAX;
    for (ggml_backend_buffer_type * m : members_) s = std::min(s, m->max_size());
    return s;
}

size_t BufferType::alloc_size(const ggml_tensor * t) const {
    size_t s = 0;
    for (ggml_backend_buffer_type * m : members_) s = std::max(s, m->alloc_size(t));
    return s;
}

Device::Device(std::vector<ggml_backend_device *> members, ggml_backend_meta_get_split_state_t get_split_state,
               void * userdata)
    : ggml_backend_device(nullptr), members_(std::move(members)), get_split_state_(get_split_state),
      userdata_(userdata), name_(joined(members_, ggml_backend_dev_name)),
      description_(joined(members_, ggml_backend_dev_description)), buft_(this, member_bufts(members_)) {}

void Device::memory(size_t * free, size_t * total) const {
    size_t f = 0, t = 0;
    for (ggml_backend_device * d : members_) {
        size_t df = 0, dt = 0;
        ggml_backend_dev_memory(d, &df, &dt);
        f += df;
        t += dt;
    }
    *free  = f;
    *total = t;
}

// Tensors may come from mapped files when every member takes them. The meta device has no
// asynchronous transfers, events, host buffers or host-pointer buffers of its own.
ggml_backend_dev_caps Device::caps() const {
    ggml_backend_dev_caps c{};
    c.mmap_support = true;
    for (ggml_backend_device * d : members_) {
        ggml_backend_dev_props p{};
        ggml_backend_dev_get_props(d, &p);
        c.mmap_support = c.mmap_support && p.caps.mmap_support;
    }
    return c;
}

ggml_backend_buffer_type * Device::host_buffer_type() {
    ggml_backend_buffer_type * host = nullptr;
    for (ggml_backend_device * d : members_) {
        ggml_backend_buffer_type * h = d->host_buffer_type();
        if (h == nullptr || (host != nullptr && h != host)) return nullptr;
        host = h;
    }
    return host;
}

bool Device::supports_op(const ggml_tensor * op) const {
    return std::all_of(members_.begin(), members_.end(), [op](ggml_backend_device * d) { return d->supports_op(op); });
}

bool Device::supports_buft(const ggml_backend_buffer_type * buft) const {
    return buft == &buft_;
}

} // namespace loom::meta

extern "C" {

const char * ggml_backend_meta_split_axis_name(enum ggml_backend_meta_split_axis split_axis) {
    switch (split_axis) {
        case GGML_BACKEND_SPLIT_AXIS_0: return "0";
        case GGML_BACKEND_SPLIT_AXIS_1: return "1";
        case GGML_BACKEND_SPLIT_AXIS_2: return "2";
        case GGML_BACKEND_SPLIT_AXIS_3: return "3";
        case GGML_BACKEND_SPLIT_AXIS_MIRRORED: return "MIRRORED";
        case GGML_BACKEND_SPLIT_AXIS_PARTIAL: return "PARTIAL";
        case GGML_BACKEND_SPLIT_AXIS_NONE: return "NONE";
        case GGML_BACKEND_SPLIT_AXIS_UNKNOWN: return "UNKNOWN";
    }
    loom::fail(__func__, "%d is not a split axis", int(split_axis));
}

ggml_backend_dev_t ggml_backend_meta_device(ggml_backend_dev_t * devs, size_t n_devs,
                                            ggml_backend_meta_get_split_state_t get_split_state,
                                            void * get_split_state_ud) {
    LOOM_REQUIRE(n_devs >= 1 && n_devs <= GGML_BACKEND_META_MAX_DEVICES, "%zu devices (1 to %d allowed)", n_devs,
                 GGML_BACKEND_META_MAX_DEVICES);
    LOOM_REQUIRE(devs != nullptr && get_split_state != nullptr, "NULL %s", devs == nullptr ? "devs" : "get_split_state");
    std::vector<ggml_backend_device *> members(devs, devs + n_devs);
    for (size_t i = 0; i < n_devs; ++i) {
        LOOM_REQUIRE(members[i] != nullptr, "device %zu is NULL", i);
        LOOM_REQUIRE(members[i]->type() != GGML_BACKEND_DEVICE_TYPE_META, "device %zu (%s) is a meta device", i,
                     members[i]->name());
    }
    using Key = std::tuple<std::vector<ggml_backend_device *>, ggml_backend_meta_get_split_state_t, void *>;
    // Meta devices live as long as the process, as registered devices do.
    static std::mutex                                                mutex;
    static std::map<Key, std::unique_ptr<loom::meta::Device>> * const devices =
        new std::map<Key, std::unique_ptr<loom::meta::Device>>();
    std::lock_guard<std::mutex> lock(mutex);
    Key                         key{members, get_split_state, get_split_state_ud};
    auto                        it = devices->find(key);
    if (it == devices->end()) {
        it = devices->emplace(key, std::make_unique<loom::meta::Device>(members, get_split_state, get_split_state_ud))
                 .first;
    }
    return it->second.get();
}

} // extern "C"
