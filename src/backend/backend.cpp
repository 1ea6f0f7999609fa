// Backends (streams on a device): transfers, plans and graph computation.

#include <memory>

#include "backend_impl.h"
#include "core/common.h"

using namespace loom;

namespace {
struct DefaultPlan {
    ggml_cgraph * graph;
};
} // namespace

void ggml_backend::set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    ggml_backend_tensor_set(t, data, offset, n);
}
void ggml_backend::get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    ggml_backend_tensor_get(t, data, offset, n);
}
void ggml_backend::set_tensor_2d_async(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                                       size_t stride_tensor, size_t stride_data) {
    for (size_t i = 0; i < n_copies; ++i) {
        set_tensor_async(t, static_cast<const char *>(data) + i * stride_data, offset + i * stride_tensor, n);
    }
}
void ggml_backend::get_tensor_2d_async(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                                       size_t stride_tensor, size_t stride_data) {
    for (size_t i = 0; i < n_copies; ++i) {
        get_tensor_async(t, static_cast<char *>(data) + i * stride_data, offset + i * stride_tensor, n);
    }
}
ggml_backend_graph_plan_t ggml_backend::graph_plan_create(ggml_cgraph * graph) {
    return new DefaultPlan{graph};
}
void ggml_backend::graph_plan_free(ggml_backend_graph_plan_t plan) {
    delete static_cast<DefaultPlan *>(plan);
}
ggml_status ggml_backend::graph_plan_compute(ggml_backend_graph_plan_t plan) {
    return graph_compute(static_cast<DefaultPlan *>(plan)->graph);
}

extern "C" {

ggml_guid_t ggml_backend_guid(ggml_backend_t backend) {
    return backend ? backend->guid : nullptr;
}

const char * ggml_backend_name(ggml_backend_t backend) {
    return backend ? backend->name() : "NULL";
}

void ggml_backend_free(ggml_backend_t backend) {
    delete backend;
}

ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend) {
    return backend->device->buffer_type();
}

ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size) {
    return ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend), size);
}

size_t ggml_backend_get_alignment(ggml_backend_t backend) {
    return ggml_backend_buft_get_alignment(ggml_backend_get_default_buffer_type(backend));
}

size_t ggml_backend_get_max_size(ggml_backend_t backend) {
    return ggml_backend_buft_get_max_size(ggml_backend_get_default_buffer_type(backend));
}

void ggml_backend_tensor_set_async(ggml_backend_t backend, ggml_tensor * tensor, const void * data, size_t offset,
                                   size_t size) {
    LOOM_REQUIRE(tensor != nullptr && tensor->data != nullptr, "tensor %s is not allocated", describe(tensor).text);
    LOOM_REQUIRE(offset <= ggml_nbytes(tensor) && size <= ggml_nbytes(tensor) - offset,
                 "offset %zu + size %zu is out of bounds of tensor %s (%zu bytes)", offset, size,
                 describe(tensor).text, ggml_nbytes(tensor));
    if (size == 0) {
        return;
    }
    backend->set_tensor_async(tensor, data, offset, size);
}

void ggml_backend_tensor_get_async(ggml_backend_t backend, const ggml_tensor * tensor, void * data, size_t offset,
                                   size_t size) {
    LOOM_REQUIRE(tensor != nullptr && tensor->data != nullptr, "tensor %s is not allocated", describe(tensor).text);
    LOOM_REQUIRE(offset <= ggml_nbytes(tensor) && size <= ggml_nbytes(tensor) - offset,
                 "offset %zu + size %zu is out of bounds of tensor %s (%zu bytes)", offset, size,
                 describe(tensor).text, ggml_nbytes(tensor));
    if (size == 0) {
        return;
    }
    backend->get_tensor_async(tensor, data, offset, size);
}

void ggml_backend_tensor_set_2d_async(ggml_backend_t backend, ggml_tensor * tensor, const void * data, size_t offset,
                                      size_t size, size_t n_copies, size_t stride_tensor, size_t stride_data) {
    if (n_copies == 0 || size == 0) {
        return;
    }
    check_2d(tensor, offset, size, n_copies, stride_tensor, __func__);
    if (n_copies == 1) {
        backend->set_tensor_async(tensor, data, offset, size);
        return;
    }
    backend->set_tensor_2d_async(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

void ggml_backend_tensor_get_2d_async(ggml_backend_t backend, const ggml_tensor * tensor, void * data, size_t offset,
                                      size_t size, size_t n_copies, size_t stride_tensor, size_t stride_data) {
    if (n_copies == 0 || size == 0) {
        return;
    }
    check_2d(tensor, offset, size, n_copies, stride_tensor, __func__);
    if (n_copies == 1) {
        backend->get_tensor_async(tensor, data, offset, size);
        return;
    }
    backend->get_tensor_2d_async(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

void ggml_backend_synchronize(ggml_backend_t backend) {
    backend->synchronize();
}

ggml_backend_graph_plan_t ggml_backend_graph_plan_create(ggml_backend_t backend, ggml_cgraph * cgraph) {
    return backend->graph_plan_create(cgraph);
}

void ggml_backend_graph_plan_free(ggml_backend_t backend, ggml_backend_graph_plan_t plan) {
    if (plan != nullptr) {
        backend->graph_plan_free(plan);
    }
}

ggml_status ggml_backend_graph_plan_compute(ggml_backend_t backend, ggml_backend_graph_plan_t plan) {
    LOOM_REQUIRE(plan != nullptr, "NULL plan");
    return backend->graph_plan_compute(plan);
}

ggml_status ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph) {
    const ggml_status st = ggml_backend_graph_compute_async(backend, cgraph);
    backend->synchronize();
    const ggml_status later = backend->take_async_status();
    return st != GGML_STATUS_SUCCESS ? st : later;
}

ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, ggml_cgraph * cgraph) {
    LOOM_REQUIRE(backend != nullptr && cgraph != nullptr, "NULL backend or graph");
    return backend->graph_compute(cgraph);
}

bool ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op) {
    return backend->device->supports_op(op);
}

bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft) {
    return backend->device->supports_buft(buft);
}

bool ggml_backend_offload_op(ggml_backend_t backend, const ggml_tensor * op) {
    return backend->device->offload_op(op);
}

void ggml_backend_tensor_copy_async(ggml_backend_t backend_src, ggml_backend_t backend_dst, const ggml_tensor * src,
                                    ggml_tensor * dst) {
    LOOM_REQUIRE(ggml_are_same_shape(src, dst) && src->type == dst->type,
                 "source %s and destination %s differ in shape or type", describe(src).text, describe(dst).text);
    if (src == dst) {
        return;
    }
    if (backend_dst->cpy_tensor_async(backend_src, src, dst)) {
        return;
    }
    // No direct path: wait for both streams, then copy synchronously.
    backend_src->synchronize();
    backend_dst->synchronize();
    ggml_backend_tensor_copy(src, dst);
}

ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend) {
    return backend->device;
}

} // extern "C"
