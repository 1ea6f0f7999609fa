// Devices and regs: thin C entry points over the C++ objects.

#include "backend_impl.h"
#include "core/common.h"

extern "C" {

const char * ggml_backend_dev_name(ggml_backend_dev_t device) {
    return device->name();
}
const char * ggml_backend_dev_description(ggml_backend_dev_t device) {
    return device->description();
}
void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total) {
    size_t f = 0, t = 0;
    device->memory(&f, &t);
    if (free) *free = f;
    if (total) *total = t;
}
enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device) {
    return device->type();
}
void ggml_backend_dev_get_props(ggml_backend_dev_t device, ggml_backend_dev_props * props) {
    LOOM_REQUIRE(props != nullptr, "NULL props");
    *props             = ggml_backend_dev_props{};
    props->name        = device->name();
    props->description = device->description();
    device->memory(&props->memory_free, &props->memory_total);
    props->type      = device->type();
    props->device_id = device->device_id();
    props->caps      = device->caps();
}
ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device) {
    return device->reg;
}
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params) {
    return device->init_backend(params);
}
ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device) {
    return device->buffer_type();
}
ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device) {
    return device->host_buffer_type();
}
ggml_backend_buffer_t ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t device, void * ptr, size_t size,
                                                            size_t max_tensor_size) {
    return device->buffer_from_host_ptr(ptr, size, max_tensor_size);
}
bool ggml_backend_dev_supports_op(ggml_backend_dev_t device, const ggml_tensor * op) {
    return device->supports_op(op);
}
bool ggml_backend_dev_supports_buft(ggml_backend_dev_t device, ggml_backend_buffer_type_t buft) {
    return device->supports_buft(buft);
}
bool ggml_backend_dev_offload_op(ggml_backend_dev_t device, const ggml_tensor * op) {
    return device->offload_op(op);
}

const char * ggml_backend_reg_name(ggml_backend_reg_t reg) {
    return reg->name();
}
size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg) {
    return reg->device_count();
}
ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index) {
    LOOM_REQUIRE(index < reg->device_count(), "device index %zu out of range (reg %s has %zu)", index, reg->name(),
                 reg->device_count());
    return reg->device(index);
}
void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name) {
    return name != nullptr ? reg->proc_address(name) : nullptr;
}

} // extern "C"
