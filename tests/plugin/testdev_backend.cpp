// The test device's backend: an asynchronous stream that computes with the
// CPU kernels on device memory.

#include <exception>
#include <unordered_map>
#include <unordered_set>

#include "ggml-cpu.h"
#include "testdev_impl.h"

namespace testdev {

namespace {

ggml_guid g_guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x74, 0x65, 0x73,
                    0x74, 0x64, 0x65, 0x76, 0x11, 0x52, 0x8e, 0x03};

bool is_noop(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return true;
        default: return ggml_is_empty(t);
    }
}

const char * tensor_name(const ggml_tensor * t) {
    return t->name[0] != '\0' ? t->name : "(unnamed)";
}

// The buffer of t when t's data is wholly inside this device's memory.
Buffer * device_buffer(const ggml_tensor * t, const ggml_backend_device * dev) {
    Buffer * b = buffer_of(t);
    if (b == nullptr || b->device() != dev || t->data == nullptr ||
        b->host_address(t->data, ggml_nbytes(t)) == nullptr) {
        return nullptr;
    }
    return b;
}

} // namespace

// ---- the stream ------------------------------------------------------------

Stream::Stream() : thread_([this] { main(); }) {}

Stream::~Stream() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Stream::enqueue(std::function<void()> work) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(work));
    }
    cv_.notify_all();
}

void Stream::drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Stream::main() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) {
            return; // stopping, and everything queued has run
        }
        std::function<void()> work = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
        lock.unlock();
        try {
            work();
        } catch (const std::exception & e) {
            log(GGML_LOG_LEVEL_ERROR, "testdev: queued work failed: %s\n", e.what());
        }
        lock.lock();
        busy_ = false;
        cv_.notify_all();
    }
}

// ---- the backend -----------------------------------------------------------

Backend::Backend(Device * dev) : ggml_backend(&g_guid, dev), cpu_(ggml_backend_cpu_init()) {
    if (cpu_ == nullptr) {
        throw std::bad_alloc();
    }
    ggml_backend_cpu_set_n_threads(cpu_, 1);
}

Backend::~Backend() {
    stream_.drain();
    ggml_backend_free(cpu_);
}

void Backend::set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    Buffer * b = device_buffer(t, device);
    if (b == nullptr) {
        // Not this device's memory: no stream can reach it, so copy now,
        // after the work queued before.
        synchronize();
        ggml_backend_tensor_set(t, data, offset, n);
        return;
    }
    void * address = static_cast<char *>(t->data) + offset;
    stream_.enqueue([b, address, data, n] { b->write(address, data, n); });
}

void Backend::get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    Buffer * b = device_buffer(t, device);
    if (b == nullptr) {
        synchronize();
        ggml_backend_tensor_get(t, data, offset, n);
        return;
    }
    const void * address = static_cast<const char *>(t->data) + offset;
    stream_.enqueue([b, address, data, n] { b->read(address, data, n); });
}

bool Backend::cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) {
    Buffer * to = device_buffer(dst, device);
    if (to == nullptr) {
        return false;
    }
    const ggml_backend_buffer * src_buffer = src->view_src != nullptr ? src->view_src->buffer : src->buffer;
    Buffer *                    from       = buffer_of(src);
    const bool from_host = src_buffer != nullptr && src_buffer->buft->is_host();
    if (!from_host && from == nullptr) {
        return false;
    }
    // The copy must see everything the source stream was asked to do first.
    if (backend_src != nullptr && backend_src != this) {
        backend_src->synchronize();
    }
    const size_t n    = ggml_nbytes(src);
    void *       dest = dst->data;
    if (from_host) {
        const void * data = src->data;
        stream_.enqueue([to, dest, data, n] { to->write(dest, data, n); });
    } else {
        const void * address = src->data;
        stream_.enqueue([from, to, address, dest, n] {
            std::vector<uint8_t> staging(n);
            from->read(address, staging.data(), n);
            to->write(dest, staging.data(), n);
        });
    }
    return true;
}

void Backend::synchronize() {
    stream_.drain();
}

void Backend::event_record(ggml_backend_event * event) {
    auto *         e     = static_cast<Event *>(event);
    const uint64_t point = e->next_point();
    stream_.enqueue([e, point] { e->mark_done(point); });
}

void Backend::event_wait(ggml_backend_event * event) {
    auto * e = dynamic_cast<Event *>(event);
    if (e == nullptr) {
        ggml_backend::event_wait(event); // another family's event: wait on the host
        return;
    }
    const uint64_t point = e->last_point();
    stream_.enqueue([e, point] { e->wait_for(point); });
}

ggml_status Backend::graph_compute(ggml_cgraph * graph) {
    static_cast<Device *>(device)->record_graph(graph);
    // Everything is checked here, before queueing, so that the status says
    // whether the graph can run; the queued run cannot fail.
    std::vector<ggml_tensor *> nodes;
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        ggml_tensor * node = ggml_graph_node(graph, i);
        if (is_noop(node)) {
            continue;
        }
        if (!device->supports_op(node)) {
            log(GGML_LOG_LEVEL_ERROR, "%s: op %s of tensor %s is not supported\n", name(), ggml_op_desc(node),
                tensor_name(node));
            return GGML_STATUS_FAILED;
        }
        if (device_buffer(node, device) == nullptr) {
            log(GGML_LOG_LEVEL_ERROR, "%s: tensor %s is not in this device's memory\n", name(), tensor_name(node));
            return GGML_STATUS_FAILED;
        }
        for (const ggml_tensor * s : node->src) {
            if (s != nullptr && device_buffer(s, device) == nullptr) {
                log(GGML_LOG_LEVEL_ERROR, "%s: operand %s of %s is not in this device's memory\n", name(),
                    tensor_name(s), tensor_name(node));
                return GGML_STATUS_FAILED;
            }
        }
        nodes.push_back(node);
    }
    if (!nodes.empty()) {
        stream_.enqueue([this, nodes = std::move(nodes)] { run(nodes); });
    }
    return GGML_STATUS_SUCCESS;
}

void Backend::run(const std::vector<ggml_tensor *> & nodes) {
    // Each tensor gets a twin whose data is the real location of its device
    // memory; the CPU backend then computes the twins in place.
    std::unordered_set<const ggml_tensor *> tensors;
    for (const ggml_tensor * node : nodes) {
        tensors.insert(node);
        for (const ggml_tensor * s : node->src) {
            if (s != nullptr) {
                tensors.insert(s);
            }
        }
    }
    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * tensors.size() + ggml_graph_overhead_custom(nodes.size(), false);
    params.no_alloc = true;
    ggml_context * ctx = ggml_init(params);
    if (ctx == nullptr) {
        log(GGML_LOG_LEVEL_ERROR, "%s: out of memory for a graph of %zu nodes\n", name(), nodes.size());
        return;
    }

    std::unordered_map<const ggml_tensor *, ggml_tensor *> twins;
    auto twin = [&](const ggml_tensor * t) {
        ggml_tensor *& tw = twins[t];
        if (tw == nullptr) {
            tw = ggml_new_tensor(ctx, t->type, GGML_MAX_DIMS, t->ne);
            std::copy(std::begin(t->nb), std::end(t->nb), std::begin(tw->nb));
            tw->data = device_buffer(t, device)->host_address(t->data, ggml_nbytes(t));
            ggml_set_name(tw, t->name);
        }
        return tw;
    };
    ggml_cgraph * graph = ggml_new_graph_custom(ctx, nodes.size(), false);
    for (const ggml_tensor * node : nodes) {
        ggml_tensor * tw = twin(node);
        tw->op           = node->op;
        tw->flags        = node->flags;
        std::copy(std::begin(node->op_params), std::end(node->op_params), std::begin(tw->op_params));
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            if (node->src[i] != nullptr) {
                tw->src[i] = twin(node->src[i]);
            }
        }
        ggml_graph_add_node(graph, tw);
    }
    const ggml_status st = ggml_backend_graph_compute(cpu_, graph);
    if (st != GGML_STATUS_SUCCESS) {
        log(GGML_LOG_LEVEL_ERROR, "%s: the CPU kernels failed: %s\n", name(), ggml_status_to_string(st));
    }
    ggml_free(ctx);
}

} // namespace testdev
