// A ggml backend plugin for tests only (libggml-probe.so): written to ggml
// 0.25.1's plugin ABI (API version 2, src/backends/ggml_plugin/abi.h), not
// linked to loom or to ggml, so that loom hosts it as it hosts ggml's own
// plugins (src/backends/ggml_plugin) and the tests can see what a ggml
// plugin is given.
//
// Its reg "Probe" has one device "Probe0" of type GPU, whose buffers are
// plain memory (not host buffers, so loom copies in and out through them).
// It supports every op but SCALE and computes nothing: graph_compute
// records the graph (ggml_probe_last_graph below). Its buffers' init_tensor
// sets the extra field of every tensor that is not a view to
// ggml_probe_extra_tag().
//
// Exported for the tests, found with dlopen(path, RTLD_NOLOAD) and dlsym:
//   const void * ggml_probe_extra_tag(void);
//   size_t ggml_probe_last_graph(uint64_t * uid, const ggml_tensor ** nodes,
//                                int32_t * use_counts, void ** extras,
//                                size_t capacity);
// which returns the number of nodes of the last graph computed and fills
// its uid and, for up to capacity nodes, the node (the plugin's copy),
// its use count as ggml's backends read it (ggml-impl.h,
// ggml_node_get_use_count) and its extra.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "backends/ggml_plugin/abi.h"

namespace {

namespace abi = loom::ggml_abi;

const char g_extra_tag = 0;

// ---- buffers ----------------------------------------------------------------

void * buffer_base(abi::Buffer * b) {
    return b->context;
}

void buffer_free(abi::Buffer * b) {
    std::free(b->context);
}

ggml_status buffer_init_tensor(abi::Buffer *, ggml_tensor * t) {
    if (t->view_src == nullptr) {
        t->extra = const_cast<char *>(&g_extra_tag);
    }
    return GGML_STATUS_SUCCESS;
}

void buffer_memset(abi::Buffer *, ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    std::memset(static_cast<char *>(t->data) + offset, value, n);
}

void buffer_set(abi::Buffer *, ggml_tensor * t, const void * data, size_t offset, size_t n) {
    std::memcpy(static_cast<char *>(t->data) + offset, data, n);
}

void buffer_get(abi::Buffer *, const ggml_tensor * t, void * data, size_t offset, size_t n) {
    std::memcpy(data, static_cast<const char *>(t->data) + offset, n);
}

void buffer_clear(abi::Buffer * b, uint8_t value) {
    std::memset(b->context, value, b->size);
}

const abi::BufferI k_buffer_i = {
    buffer_free, buffer_base, buffer_init_tensor, buffer_memset, buffer_set, buffer_get,
    nullptr,     nullptr,     nullptr,            buffer_clear,  nullptr,
};

const char * buft_name(abi::BufferType *) {
    return "Probe";
}

abi::Buffer * buft_alloc(abi::BufferType * buft, size_t size) {
    void * memory = std::aligned_alloc(64, (size + 63) / 64 * 64);
    if (memory == nullptr) {
        return nullptr;
    }
    return new abi::Buffer{k_buffer_i, buft, memory, size, GGML_BACKEND_BUFFER_USAGE_ANY};
}

size_t buft_alignment(abi::BufferType *) {
    return 64;
}

// ---- the graphs given to compute ------------------------------------------------

struct Record {
    std::mutex                        mutex;
    uint64_t                          uid = 0;
    std::vector<const ggml_tensor *>  nodes;
    std::vector<int32_t>              use_counts;
    std::vector<void *>               extras;
} g_record;

// ggml-impl.h's ggml_node_get_use_count, on the graph's fields.
int32_t use_count(const abi::CGraph * g, const ggml_tensor * t) {
    const abi::HashSet & set = g->visited_hash_set;
    if (set.size == 0) {
        return 0;
    }
    auto   used = [&](size_t i) { return ((set.used[i / 32] >> (i % 32)) & 1u) != 0; };
    size_t i    = (reinterpret_cast<uintptr_t>(t) >> 4) % set.size;
    for (size_t n = 0; n < set.size && used(i) && set.keys[i] != t; ++n) {
        i = (i + 1) % set.size;
    }
    return used(i) && set.keys[i] == t ? g->use_counts[i] : 0;
}

// ---- backend, device, reg -----------------------------------------------------

const char * backend_name(abi::Backend *) {
    return "Probe0";
}

void backend_free(abi::Backend * b) {
    delete b;
}

ggml_status backend_graph_compute(abi::Backend *, abi::CGraph * g) {
    std::lock_guard<std::mutex> lock(g_record.mutex);
    g_record.uid = g->uid;
    g_record.nodes.assign(g->nodes, g->nodes + g->n_nodes);
    g_record.use_counts.clear();
    g_record.extras.clear();
    for (const ggml_tensor * node : g_record.nodes) {
        g_record.use_counts.push_back(use_count(g, node));
        g_record.extras.push_back(node->extra);
    }
    return GGML_STATUS_SUCCESS;
}

abi::Device * the_device();
abi::BufferType g_buft = {{buft_name, buft_alloc, buft_alignment, nullptr, nullptr, nullptr}, nullptr, nullptr};

const char * dev_name(abi::Device *) {
    return "Probe0";
}

const char * dev_description(abi::Device *) {
    return "a ggml plugin that records the graphs it is given";
}

void dev_memory(abi::Device *, size_t * free, size_t * total) {
    *free  = size_t(1) << 30;
    *total = size_t(1) << 30;
}

enum ggml_backend_dev_type dev_type(abi::Device *) {
    return GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_props(abi::Device * dev, ggml_backend_dev_props * props) {
    props->name        = dev_name(dev);
    props->description = dev_description(dev);
    dev_memory(dev, &props->memory_free, &props->memory_total);
    props->type      = dev_type(dev);
    props->device_id = nullptr;
    props->caps      = {false, false, false, false};
}

abi::Backend * dev_init_backend(abi::Device * dev, const char *) {
    static const ggml_guid guid = {0x70, 0x72, 0x6f, 0x62, 0x65, 0x2d, 0x67, 0x67,
                                   0x6d, 0x6c, 0x2d, 0x70, 0x6c, 0x75, 0x67, 0x69};
    abi::BackendI iface{};
    iface.get_name      = backend_name;
    iface.free          = backend_free;
    iface.graph_compute = backend_graph_compute;
    return new abi::Backend{const_cast<ggml_guid *>(&guid), iface, dev, nullptr};
}

abi::BufferType * dev_buffer_type(abi::Device *) {
    return &g_buft;
}

bool dev_supports_op(abi::Device *, const ggml_tensor * op) {
    return op->op != GGML_OP_SCALE;
}

bool dev_supports_buft(abi::Device *, abi::BufferType * buft) {
    return buft == &g_buft;
}

const char * reg_name(abi::Reg *) {
    return "Probe";
}

size_t reg_device_count(abi::Reg *) {
    return 1;
}

abi::Device * reg_device(abi::Reg *, size_t index) {
    return index == 0 ? the_device() : nullptr;
}

abi::Reg g_reg = {abi::k_api_version, {reg_name, reg_device_count, reg_device, nullptr}, nullptr};

abi::Device * the_device() {
    static abi::Device dev = {{dev_name, dev_description, dev_memory, dev_type, dev_props, dev_init_backend,
                               dev_buffer_type, nullptr, nullptr, dev_supports_op, dev_supports_buft, nullptr,
                               nullptr, nullptr, nullptr},
                              &g_reg,
                              nullptr};
    g_buft.device = &dev;
    return &dev;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) abi::Reg * ggml_backend_init(void) {
    the_device();
    return &g_reg;
}

// What ggml's libggml-base does for its plugins' buffers (declared with
// loom's handle type by ggml-backend.h; the plugin's buffers are abi::Buffer).
__attribute__((visibility("default"))) void ggml_backend_buffer_free(ggml_backend_buffer_t handle) {
    auto * buffer = reinterpret_cast<abi::Buffer *>(handle);
    if (buffer == nullptr) {
        return;
    }
    if (buffer->iface.free_buffer != nullptr) {
        buffer->iface.free_buffer(buffer);
    }
    delete buffer;
}

__attribute__((visibility("default"))) const void * ggml_probe_extra_tag(void) {
    return &g_extra_tag;
}

__attribute__((visibility("default"))) size_t ggml_probe_last_graph(uint64_t * uid, const ggml_tensor ** nodes,
                                                                    int32_t * use_counts, void ** extras,
                                                                    size_t capacity) {
    std::lock_guard<std::mutex> lock(g_record.mutex);
    *uid = g_record.uid;
    for (size_t i = 0; i < g_record.nodes.size() && i < capacity; ++i) {
        nodes[i]      = g_record.nodes[i];
        use_counts[i] = g_record.use_counts[i];
        extras[i]     = g_record.extras[i];
    }
    return g_record.nodes.size();
}

} // extern "C"
