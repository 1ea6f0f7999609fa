// The plugin's backends (streams) and events as loom objects.

#include <algorithm>
#include <string>
#include <vector>

#include "core/common.h"
#include "core/graph.h"
#include "hosted.h"
#include "shadow.h"

namespace loom::ggml_plugin {

HostedEvent::~HostedEvent() {
    ggml_abi::Device * dev = static_cast<HostedDevice *>(device)->foreign();
    dev->iface.event_free(dev, event_);
}

HostedBackend::HostedBackend(HostedDevice * dev, ggml_abi::Backend * backend)
    : ggml_backend(backend->guid, dev), backend_(backend),
      name_(std::string("ggml:") + backend->iface.get_name(backend)) {}

HostedBackend::~HostedBackend() {
    backend_->iface.free(backend_);
}

void HostedBackend::set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    if (backend_->iface.set_tensor_async == nullptr || foreign_buffer(t->buffer, hosted_reg()) == nullptr) {
        ggml_backend::set_tensor_async(t, data, offset, n);
        return;
    }
    TensorShadow s(t, hosted_reg(), false);
    backend_->iface.set_tensor_async(backend_, s.get(), data, offset, n);
}

void HostedBackend::get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    if (backend_->iface.get_tensor_async == nullptr || foreign_buffer(t->buffer, hosted_reg()) == nullptr) {
        ggml_backend::get_tensor_async(t, data, offset, n);
        return;
    }
    TensorShadow s(t, hosted_reg(), false);
    backend_->iface.get_tensor_async(backend_, s.get(), data, offset, n);
}

// Only between two backends of the same plugin, both tensors in its buffers.
bool HostedBackend::cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) {
    auto * hosted_src = dynamic_cast<HostedBackend *>(backend_src);
    if (backend_->iface.cpy_tensor_async == nullptr || hosted_src == nullptr ||
        &hosted_src->hosted_reg() != &hosted_reg() || foreign_buffer(src->buffer, hosted_reg()) == nullptr ||
        foreign_buffer(dst->buffer, hosted_reg()) == nullptr) {
        return false;
    }
    TensorShadow s(src, hosted_reg(), false);
    TensorShadow d(dst, hosted_reg(), false);
    return backend_->iface.cpy_tensor_async(hosted_src->foreign(), backend_, s.get(), d.get());
}

void HostedBackend::synchronize() {
    if (backend_->iface.synchronize != nullptr) {
        backend_->iface.synchronize(backend_);
    }
    if (graphs_.size() > k_kept_graphs) {
        // Dropped: the shadows used before the k_kept_graphs-th last used.
        std::vector<uint64_t> uses;
        for (const auto & entry : graphs_) {
            uses.push_back(entry.second->last_use);
        }
        std::nth_element(uses.begin(), uses.end() - k_kept_graphs, uses.end());
        const uint64_t oldest_kept = *(uses.end() - k_kept_graphs);
        std::erase_if(graphs_, [oldest_kept](const auto & entry) { return entry.second->last_use < oldest_kept; });
    }
}

void HostedBackend::event_record(ggml_backend_event * event) {
    auto * hosted = dynamic_cast<HostedEvent *>(event);
    if (hosted == nullptr || backend_->iface.event_record == nullptr) {
        ggml_backend::event_record(event);
        return;
    }
    backend_->iface.event_record(backend_, hosted->foreign());
}

void HostedBackend::event_wait(ggml_backend_event * event) {
    auto * hosted = dynamic_cast<HostedEvent *>(event);
    if (hosted == nullptr || backend_->iface.event_wait == nullptr) {
        ggml_backend::event_wait(event);
        return;
    }
    backend_->iface.event_wait(backend_, hosted->foreign());
}

ggml_status HostedBackend::graph_compute(ggml_cgraph * graph) {
    std::unique_ptr<ShadowGraph> & shadow = graphs_[graph->nodes];
    if (shadow == nullptr) {
        shadow = std::make_unique<ShadowGraph>();
    }
    shadow->last_use = ++n_computed_;
    std::string why;
    if (!shadow->build(graph, hosted_reg(), &why)) {
        LOOM_LOG_ERROR("%s: cannot compute the graph: %s\n", name(), why.c_str());
        return GGML_STATUS_FAILED;
    }
    return backend_->iface.graph_compute(backend_, shadow->get());
}

} // namespace loom::ggml_plugin
