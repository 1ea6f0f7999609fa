#pragma once

// ggml 0.25.1's backend plugin ABI, as the plugins see it: the C structs of
// function pointers of ggml's src/ggml-backend-impl.h (GGML_BACKEND_API_VERSION
// 2) and the graph struct of src/ggml-impl.h. Field order and types are
// transcribed from those headers; the names are loom's. Nothing here is a
// loom object: a pointer to one of these structs belongs to the plugin and
// is only ever passed back to it (Note [Foreign handles]).

#include <cstddef>
#include <cstdint>

#include "ggml-backend.h"
#include "ggml.h"

namespace loom::ggml_abi {

constexpr int k_api_version = 2; // GGML_BACKEND_API_VERSION

struct Reg;
struct Device;
struct BufferType;
struct Buffer;
struct Backend;
struct Event;

// A graph as ggml's code reads it (struct ggml_cgraph of ggml-impl.h).
struct HashSet {
    size_t         size;
    uint32_t *     used; // bitset, bit i of used[i / 32]
    ggml_tensor ** keys;
};

struct CGraph {
    int            size;
    int            n_nodes;
    int            n_leafs;
    ggml_tensor ** nodes;
    ggml_tensor ** grads;
    ggml_tensor ** grad_accs;
    ggml_tensor ** leafs;
    int32_t *      use_counts; // by hash slot
    HashSet        visited_hash_set;
    int            order; // enum ggml_cgraph_eval_order
    uint64_t       uid;
};
static_assert(sizeof(CGraph) == 96, "ggml 0.25.1's ggml_cgraph is 96 bytes");
static_assert(sizeof(ggml_tensor) == 336, "ggml 0.25.1's ggml_tensor is 336 bytes");

struct BufferTypeI {
    const char * (*get_name)(BufferType * buft);
    Buffer * (*alloc_buffer)(BufferType * buft, size_t size);
    size_t (*get_alignment)(BufferType * buft);
    size_t (*get_max_size)(BufferType * buft);                              // optional
    size_t (*get_alloc_size)(BufferType * buft, const ggml_tensor * tensor); // optional
    bool (*is_host)(BufferType * buft);                                      // optional
};

struct BufferType {
    BufferTypeI iface;
    Device *    device;
    void *      context;
};

struct BufferI {
    void (*free_buffer)(Buffer * buffer); // optional
    void * (*get_base)(Buffer * buffer);
    ggml_status (*init_tensor)(Buffer * buffer, ggml_tensor * tensor); // optional
    void (*memset_tensor)(Buffer * buffer, ggml_tensor * tensor, uint8_t value, size_t offset, size_t size);
    void (*set_tensor)(Buffer * buffer, ggml_tensor * tensor, const void * data, size_t offset, size_t size);
    void (*get_tensor)(Buffer * buffer, const ggml_tensor * tensor, void * data, size_t offset, size_t size);
    void (*set_tensor_2d)(Buffer * buffer, ggml_tensor * tensor, const void * data, size_t offset, size_t size,
                          size_t n_copies, size_t stride_tensor, size_t stride_data); // optional
    void (*get_tensor_2d)(Buffer * buffer, const ggml_tensor * tensor, void * data, size_t offset, size_t size,
                          size_t n_copies, size_t stride_tensor, size_t stride_data); // optional
    bool (*cpy_tensor)(Buffer * buffer, const ggml_tensor * src, ggml_tensor * dst); // optional
    void (*clear)(Buffer * buffer, uint8_t value);
    void (*reset)(Buffer * buffer); // optional
};

struct Buffer {
    BufferI                   iface;
    BufferType *              buft;
    void *                    context;
    size_t                    size;
    ggml_backend_buffer_usage usage;
};

struct GraphOptimizeParams {
    void (*add_alloc_dep)(void * user_data, ggml_tensor * tensor, ggml_tensor * until);
    void * user_data;
};

struct BackendI {
    const char * (*get_name)(Backend * backend);
    void (*free)(Backend * backend);
    // optional from here on, except graph_compute
    void (*set_tensor_async)(Backend * backend, ggml_tensor * tensor, const void * data, size_t offset, size_t size);
    void (*get_tensor_async)(Backend * backend, const ggml_tensor * tensor, void * data, size_t offset, size_t size);
    void (*set_tensor_2d_async)(Backend * backend, ggml_tensor * tensor, const void * data, size_t offset, size_t size,
                                size_t n_copies, size_t stride_tensor, size_t stride_data);
    void (*get_tensor_2d_async)(Backend * backend, const ggml_tensor * tensor, void * data, size_t offset,
                                size_t size, size_t n_copies, size_t stride_tensor, size_t stride_data);
    bool (*cpy_tensor_async)(Backend * backend_src, Backend * backend_dst, const ggml_tensor * src, ggml_tensor * dst);
    void (*synchronize)(Backend * backend);
    void * (*graph_plan_create)(Backend * backend, const CGraph * graph);
    void (*graph_plan_free)(Backend * backend, void * plan);
    void (*graph_plan_update)(Backend * backend, void * plan, const CGraph * graph);
    ggml_status (*graph_plan_compute)(Backend * backend, void * plan);
    ggml_status (*graph_compute)(Backend * backend, CGraph * graph);
    void (*event_record)(Backend * backend, Event * event);
    void (*event_wait)(Backend * backend, Event * event);
    void (*graph_optimize)(Backend * backend, CGraph * graph, GraphOptimizeParams * params);
};

struct Backend {
    ggml_guid_t guid;
    BackendI    iface;
    Device *    device;
    void *      context;
};

struct Event {
    Device * device;
    void *   context;
};

struct DeviceI {
    const char * (*get_name)(Device * dev);
    const char * (*get_description)(Device * dev);
    void (*get_memory)(Device * dev, size_t * free, size_t * total);
    enum ggml_backend_dev_type (*get_type)(Device * dev);
    void (*get_props)(Device * dev, ggml_backend_dev_props * props);
    Backend * (*init_backend)(Device * dev, const char * params);
    BufferType * (*get_buffer_type)(Device * dev);
    BufferType * (*get_host_buffer_type)(Device * dev);                                       // optional
    Buffer * (*buffer_from_host_ptr)(Device * dev, void * ptr, size_t size, size_t max_tensor_size); // optional
    bool (*supports_op)(Device * dev, const ggml_tensor * op);
    bool (*supports_buft)(Device * dev, BufferType * buft);
    bool (*offload_op)(Device * dev, const ggml_tensor * op); // optional
    Event * (*event_new)(Device * dev);                        // optional, with the next two
    void (*event_free)(Device * dev, Event * event);
    void (*event_synchronize)(Device * dev, Event * event);
};

struct Device {
    DeviceI iface;
    Reg *   reg;
    void *  context;
};

struct RegI {
    const char * (*get_name)(Reg * reg);
    size_t (*get_device_count)(Reg * reg);
    Device * (*get_device)(Reg * reg, size_t index);
    void * (*get_proc_address)(Reg * reg, const char * name); // optional
};

struct Reg {
    int    api_version;
    RegI   iface;
    void * context;
};

// The plugin's entry points (ggml_backend_init, ggml_backend_score) and the
// functions of its libggml-base that free what the plugin allocated there.
using InitFn         = Reg * (*) ();
using ScoreFn        = int (*)();
using BufferFreeFn   = void (*)(Buffer * buffer);
using SetNThreadsFn  = void (*)(Backend * backend, int n_threads);
using SetAbortFn     = void (*)(Backend * backend, ggml_abort_callback callback, void * data);
using ExtraBuftsFn   = BufferType ** (*) (Device * dev);
using LogSetFn       = void (*)(ggml_log_callback callback, void * user_data);

} // namespace loom::ggml_abi
