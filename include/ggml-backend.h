#pragma once

// loom: the backend layer of the ggml C API.
//
//   buffer type -> buffer -> tensor data
//   reg (a family of devices) -> device -> backend (a stream on the device)
//
// Ownership: ggml_backend_buft_alloc_buffer / ggml_backend_alloc_buffer
// return a buffer the caller frees with ggml_backend_buffer_free;
// ggml_backend_*_init return a backend the caller frees with
// ggml_backend_free; ggml_backend_event_new an event freed with
// ggml_backend_event_free. Buffer types, devices and regs belong to their
// backend family and live for the whole process (for a family loaded as a
// plugin: until ggml_backend_unload).
//
// Errors: allocation failure returns NULL (with a logged reason); a compute
// returns a ggml_status. Out-of-range tensor access aborts with a message
// naming the tensor (a precondition of the API).

#include "ggml-alloc.h"
#include "ggml.h"

#define GGML_BACKEND_API GGML_API

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer *      ggml_backend_buffer_t;
typedef struct ggml_backend_event *       ggml_backend_event_t;
typedef struct ggml_backend *             ggml_backend_t;
typedef void *                            ggml_backend_graph_plan_t;
typedef struct ggml_backend_reg *         ggml_backend_reg_t;
typedef struct ggml_backend_device *      ggml_backend_dev_t;

//
// Buffer types
//

GGML_API const char *          ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
// A zero-size request returns a valid buffer of size zero. NULL on failure.
GGML_API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
GGML_API size_t                ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft);
GGML_API size_t                ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft);
// Bytes a tensor needs in a buffer of this type; never less than ggml_nbytes.
GGML_API size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * tensor);
GGML_API bool   ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft);
GGML_API ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft);

//
// Buffers
//

enum ggml_backend_buffer_usage {
    GGML_BACKEND_BUFFER_USAGE_ANY     = 0,
    GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
    GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2,
};

GGML_API const char *     ggml_backend_buffer_name(ggml_backend_buffer_t buffer);
GGML_API void             ggml_backend_buffer_free(ggml_backend_buffer_t buffer); // NULL is a no-op
GGML_API void *           ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer);
GGML_API size_t           ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer);
GGML_API enum ggml_status ggml_backend_buffer_init_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor);
GGML_API size_t           ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer);
GGML_API size_t           ggml_backend_buffer_get_max_size(ggml_backend_buffer_t buffer);
GGML_API size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const struct ggml_tensor * tensor);
GGML_API void   ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value);
GGML_API bool   ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer);
GGML_API void   ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);
GGML_API enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer);
GGML_API ggml_backend_buffer_type_t     ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer);
GGML_API void                           ggml_backend_buffer_reset(ggml_backend_buffer_t buffer);

// Copies data between tensors of the same layout, in any buffers.
GGML_API void ggml_backend_tensor_copy(const struct ggml_tensor * src, struct ggml_tensor * dst);

// A buffer made of n_buffers buffers of one type, for allocations larger
// than the type's maximum buffer size. Tensors are placed in the parts; the
// multi-buffer takes ownership of the parts and frees them with itself.
// Usage, clear and reset apply to every part. Returns NULL (logged, the
// parts still the caller's) when memory runs out.
GGML_API ggml_backend_buffer_t ggml_backend_multi_buffer_alloc_buffer(ggml_backend_buffer_t * buffers,
                                                                      size_t                  n_buffers);
GGML_API bool ggml_backend_buffer_is_multi_buffer(ggml_backend_buffer_t buffer);
// Same as ggml_backend_buffer_set_usage; buffer must be a multi-buffer.
GGML_API void ggml_backend_multi_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);

//
// Backends (streams)
//

GGML_API ggml_guid_t  ggml_backend_guid(ggml_backend_t backend);
GGML_API const char * ggml_backend_name(ggml_backend_t backend);
GGML_API void         ggml_backend_free(ggml_backend_t backend); // NULL is a no-op

GGML_API ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend);
GGML_API ggml_backend_buffer_t      ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size);
GGML_API size_t                     ggml_backend_get_alignment(ggml_backend_t backend);
GGML_API size_t                     ggml_backend_get_max_size(ggml_backend_t backend);

// Asynchronous transfers on the backend's stream; complete at ggml_backend_synchronize.
GGML_API void ggml_backend_tensor_set_async(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data,
                                            size_t offset, size_t size);
GGML_API void ggml_backend_tensor_get_async(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data,
                                            size_t offset, size_t size);
// n_copies blocks of size bytes, as ggml_backend_tensor_set_2d, in the backend's stream.
GGML_API void ggml_backend_tensor_set_2d_async(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data,
                                               size_t offset, size_t size, size_t n_copies, size_t stride_tensor,
                                               size_t stride_data);
GGML_API void ggml_backend_tensor_get_2d_async(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data,
                                               size_t offset, size_t size, size_t n_copies, size_t stride_tensor,
                                               size_t stride_data);

// Synchronous transfers. offset + size must lie within the tensor.
GGML_API void ggml_backend_tensor_set(struct ggml_tensor * tensor, const void * data, size_t offset, size_t size);
GGML_API void ggml_backend_tensor_get(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size);
// n_copies blocks of size bytes: tensor offset + i*stride_tensor <-> data + i*stride_data.
GGML_API void ggml_backend_tensor_set_2d(struct ggml_tensor * tensor, const void * data, size_t offset, size_t size,
                                         size_t n_copies, size_t stride_tensor, size_t stride_data);
GGML_API void ggml_backend_tensor_get_2d(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size,
                                         size_t n_copies, size_t stride_tensor, size_t stride_data);
GGML_API void ggml_backend_tensor_memset(struct ggml_tensor * tensor, uint8_t value, size_t offset, size_t size);

GGML_API void ggml_backend_synchronize(ggml_backend_t backend);

// A plan prepares a graph for repeated computation. Free it with graph_plan_free.
GGML_API ggml_backend_graph_plan_t ggml_backend_graph_plan_create(ggml_backend_t backend, struct ggml_cgraph * cgraph);
GGML_API void                      ggml_backend_graph_plan_free(ggml_backend_t backend, ggml_backend_graph_plan_t plan);

GGML_API enum ggml_status ggml_backend_graph_plan_compute(ggml_backend_t backend, ggml_backend_graph_plan_t plan);
GGML_API enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph);
GGML_API enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph * cgraph);

GGML_API bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op);
GGML_API bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft);
GGML_API bool ggml_backend_offload_op(ggml_backend_t backend, const struct ggml_tensor * op);

// Copies src to dst, asynchronously where the backends allow it.
GGML_API void ggml_backend_tensor_copy_async(ggml_backend_t backend_src, ggml_backend_t backend_dst,
                                             const struct ggml_tensor * src, struct ggml_tensor * dst);

GGML_API ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend);

//
// Events: a point in a backend's stream that other streams or the host can wait for.
//

// NULL when the device has no events (caps.events is false, as for the CPU).
// Free with ggml_backend_event_free.
GGML_API ggml_backend_event_t ggml_backend_event_new(ggml_backend_dev_t device);
GGML_API void                 ggml_backend_event_free(ggml_backend_event_t event); // NULL is a no-op
// Marks the end of the work queued so far on backend, which must run on the event's device.
GGML_API void ggml_backend_event_record(ggml_backend_event_t event, ggml_backend_t backend);
// Blocks until the work before the last record is done.
GGML_API void ggml_backend_event_synchronize(ggml_backend_event_t event);
// Work queued on backend (of any device) after this call starts once the event is complete.
GGML_API void ggml_backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event);

//
// Devices
//

enum ggml_backend_dev_type {
    GGML_BACKEND_DEVICE_TYPE_CPU,   // the host processor
    GGML_BACKEND_DEVICE_TYPE_GPU,   // a discrete GPU with its own memory
    GGML_BACKEND_DEVICE_TYPE_IGPU,  // an integrated GPU sharing host memory
    GGML_BACKEND_DEVICE_TYPE_ACCEL, // an accelerator used beside the CPU (BLAS, ...)
    GGML_BACKEND_DEVICE_TYPE_META,  // several devices that share each tensor (ggml_backend_meta_device)
};

struct ggml_backend_dev_caps {
    bool async;                // asynchronous operations
    bool host_buffer;          // pinned host buffer type
    bool buffer_from_host_ptr; // buffers wrapping host memory
    bool events;               // event synchronisation
    bool mmap_support;         // tensors may be loaded from memory-mapped files
};

struct ggml_backend_dev_props {
    const char *                 name;
    const char *                 description;
    size_t                       memory_free;
    size_t                       memory_total;
    enum ggml_backend_dev_type   type;
    const char *                 device_id; // may be NULL
    struct ggml_backend_dev_caps caps;
};

GGML_API const char *               ggml_backend_dev_name(ggml_backend_dev_t device);
GGML_API const char *               ggml_backend_dev_description(ggml_backend_dev_t device);
GGML_API void                       ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
GGML_API enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device);
GGML_API void               ggml_backend_dev_get_props(ggml_backend_dev_t device, struct ggml_backend_dev_props * props);
GGML_API ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
GGML_API ggml_backend_t     ggml_backend_dev_init(ggml_backend_dev_t device, const char * params);
GGML_API ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device);
GGML_API ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device); // may be NULL
GGML_API ggml_backend_buffer_t ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t device, void * ptr, size_t size,
                                                                     size_t max_tensor_size);
GGML_API bool ggml_backend_dev_supports_op(ggml_backend_dev_t device, const struct ggml_tensor * op);
GGML_API bool ggml_backend_dev_supports_buft(ggml_backend_dev_t device, ggml_backend_buffer_type_t buft);
GGML_API bool ggml_backend_dev_offload_op(ggml_backend_dev_t device, const struct ggml_tensor * op);

//
// Regs (families of devices)
//

GGML_API const char *       ggml_backend_reg_name(ggml_backend_reg_t reg);
GGML_API size_t             ggml_backend_reg_dev_count(ggml_backend_reg_t reg);
GGML_API ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index);
// Optional functions of a backend family by name (e.g. "ggml_backend_set_n_threads"); NULL when absent.
GGML_API void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);

// Signatures of functions reached through ggml_backend_reg_get_proc_address.
typedef void (*ggml_backend_set_n_threads_t)(ggml_backend_t backend, int n_threads);
// "ggml_backend_split_buffer_type": a buffer type splitting matrix rows over a family's devices.
typedef ggml_backend_buffer_type_t (*ggml_backend_split_buffer_type_t)(int main_device, const float * tensor_split);
typedef ggml_backend_buffer_type_t * (*ggml_backend_dev_get_extra_bufts_t)(ggml_backend_dev_t device);
typedef void (*ggml_backend_set_abort_callback_t)(ggml_backend_t backend, ggml_abort_callback abort_callback,
                                                  void * abort_callback_data);

struct ggml_backend_feature {
    const char * name;
    const char * value;
};
// A list ending with a {NULL, NULL} entry.
typedef struct ggml_backend_feature * (*ggml_backend_get_features_t)(ggml_backend_reg_t reg);

//
// The registry. Names compare case-insensitively. Registering, looking up
// and loading may happen from several threads; unloading must not race with
// any use of the family being unloaded.
//

GGML_API void ggml_backend_register(ggml_backend_reg_t reg);
GGML_API void ggml_backend_device_register(ggml_backend_dev_t device);

GGML_API size_t             ggml_backend_reg_count(void);
GGML_API ggml_backend_reg_t ggml_backend_reg_get(size_t index);
GGML_API ggml_backend_reg_t ggml_backend_reg_by_name(const char * name);

GGML_API size_t             ggml_backend_dev_count(void);
GGML_API ggml_backend_dev_t ggml_backend_dev_get(size_t index);
GGML_API ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);
GGML_API ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type);

// Initialise a backend on the first matching device; NULL when there is none.
GGML_API ggml_backend_t ggml_backend_init_by_name(const char * name, const char * params);
GGML_API ggml_backend_t ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params);
// GPU, else IGPU, else CPU.
GGML_API ggml_backend_t ggml_backend_init_best(void);

//
// Backend plugins
//
// A backend family can be built as a shared library that links to libloom
// and derives from loom's backend classes. It exports, with C linkage:
//
//   int                loom_backend_api_version(void); // required: LOOM_BACKEND_API_VERSION
//   ggml_backend_reg_t ggml_backend_init(void);        // required: the family's reg (owned by the library)
//   int                ggml_backend_score(void);       // optional: 0 = cannot run on this machine;
//                                                      // among variants of one family the highest wins
//
// The version is checked before anything else in the library is called,
// because the classes' layout is part of the contract. Files are found by
// name: libloom-<family>.so or libloom-<family>-<variant>.so.
//
// GGML_BACKEND_PATH (read once, at the first use of the loader) is a
// ':'-separated list: a directory is searched by ggml_backend_load_all
// before the default places, a file is loaded by it directly.

#define LOOM_BACKEND_API_VERSION 3

typedef int (*loom_backend_api_version_t)(void);
typedef ggml_backend_reg_t (*ggml_backend_init_t)(void);
typedef int (*ggml_backend_score_t)(void);

// Loads and registers the backend in the library at path. Returns its reg,
// or NULL with a logged reason (no such file, not a shared library, no entry
// point, another API version, score 0, init failed, a family of that name is
// already registered) and the registry unchanged. Loading a library that is
// already loaded returns its reg.
GGML_API ggml_backend_reg_t ggml_backend_load(const char * path);
// Unregisters reg and its devices and, when it came from a library, closes
// the library. Every backend, buffer and event of the family must be freed
// first. An unknown reg is logged and ignored.
GGML_API void ggml_backend_unload(ggml_backend_reg_t reg);
// Loads the best variant of every family found in GGML_BACKEND_PATH, the
// executable's directory and the working directory (the highest score; each
// candidate is opened to read it). A family whose name is registered already
// is not loaded again. Failures are logged, never fatal.
GGML_API void ggml_backend_load_all(void);
// Same, searching dir_path only (NULL: as ggml_backend_load_all).
GGML_API void ggml_backend_load_all_from_path(const char * dir_path);

//
// Utilities
//

// A graph copied to another backend: the copies of its tensors live in
// buffer (allocated ones, with the data copied over) and in the two
// contexts. Free everything with ggml_backend_graph_copy_free.
struct ggml_backend_graph_copy {
    ggml_backend_buffer_t buffer;
    struct ggml_context * ctx_allocated;   // tensors with their own memory in buffer
    struct ggml_context * ctx_unallocated; // views, placed in their sources
    struct ggml_cgraph *  graph;
};

// Every tensor of graph must be allocated. On failure (logged) every member is NULL.
GGML_API struct ggml_backend_graph_copy ggml_backend_graph_copy(ggml_backend_t backend, struct ggml_cgraph * graph);
GGML_API void                           ggml_backend_graph_copy_free(struct ggml_backend_graph_copy copy);

// Called with the same node of both graphs; returning false stops the comparison.
typedef bool (*ggml_backend_eval_callback)(int node_index, struct ggml_tensor * t1, struct ggml_tensor * t2,
                                           void * user_data);

// Copies graph (allocated for backend1) to backend2 and computes both node
// by node, calling callback after each node that is not a view (VIEW,
// RESHAPE, PERMUTE, TRANSPOSE). With test_nodes, computes the whole graphs
// once and calls callback for those nodes only. Returns false (logged) when
// the copy cannot be made or a computation fails.
GGML_API bool ggml_backend_compare_graph_backend(ggml_backend_t backend1, ggml_backend_t backend2,
                                                 struct ggml_cgraph * graph, ggml_backend_eval_callback callback,
                                                 void * user_data, struct ggml_tensor const * const * test_nodes,
                                                 size_t num_test_nodes);

// Places tensor at addr inside buffer and initialises it there.
GGML_API enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor,
                                                    void * addr);
// Sets a view's buffer and data from its view_src.
GGML_API enum ggml_status ggml_backend_view_init(struct ggml_tensor * tensor);

// CPU host memory: a buffer wrapping caller-owned memory (not freed with
// the buffer), and the CPU buffer type.
GGML_API ggml_backend_buffer_t      ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size);
GGML_API ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void);

// ---- Meta device ------------------------------------------------------------
//
// A meta device makes several devices act as one for tensor parallelism: each
// tensor of its buffers is split over the member devices (or mirrored on all
// of them), and its backend computes a graph as one graph per member, each on
// its slice, summing partial results over the members where an operation
// needs it (all-reduce).

#define GGML_BACKEND_META_MAX_DEVICES 16

enum ggml_backend_meta_split_axis {
    // the tensor is cut along one of its dimensions
    GGML_BACKEND_SPLIT_AXIS_0 = 0,
    GGML_BACKEND_SPLIT_AXIS_1 = 1,
    GGML_BACKEND_SPLIT_AXIS_2 = 2,
    GGML_BACKEND_SPLIT_AXIS_3 = 3,

    GGML_BACKEND_SPLIT_AXIS_MIRRORED = 10, // every member holds the whole tensor
    GGML_BACKEND_SPLIT_AXIS_PARTIAL  = 11, // every member holds a partial sum of the tensor

    // bookkeeping values, never a valid answer of a split-state callback
    GGML_BACKEND_SPLIT_AXIS_NONE    = 98,
    GGML_BACKEND_SPLIT_AXIS_UNKNOWN = 99,
};
// "0" ... "3", "MIRRORED", "PARTIAL", "NONE", "UNKNOWN"; aborts on another value.
GGML_API const char * ggml_backend_meta_split_axis_name(enum ggml_backend_meta_split_axis split_axis);

// How one tensor is split. For a split axis, the tensor is a sequence of
// n_segments segments along that axis, segment s repeated nr[s] times; each
// segment is cut over the members, member j getting ne[s*n_devs + j]
// elements of it (0 is allowed). Member j's slice is the concatenation of its
// pieces in the order seg0 r0, seg0 r1, ..., seg1 r0, ... The pieces add up
// to the tensor's extent along the axis. A fused QKV matrix is an example of
// three segments (or of two, the second repeated twice).
struct ggml_backend_meta_split_state {
    enum ggml_backend_meta_split_axis axis;
    int64_t                           ne[16 * GGML_BACKEND_META_MAX_DEVICES];
    uint32_t                          nr[16];
    uint32_t                          n_segments;
};

// Asked once for each tensor without an operation (weights, inputs) that is
// placed in a meta buffer; the states of computed tensors follow from their
// sources.
typedef struct ggml_backend_meta_split_state (*ggml_backend_meta_get_split_state_t)(const struct ggml_tensor * tensor,
                                                                                     void * userdata);

// The meta device over devs[0..n_devs) (1 <= n_devs <= GGML_BACKEND_META_MAX_DEVICES,
// distinct or repeated devices). The same arguments give the same device; it
// lives as long as the process. Its buffer type, buffers and backend follow
// from it as for any device. get_split_state must not be NULL.
GGML_API ggml_backend_dev_t ggml_backend_meta_device(ggml_backend_dev_t * devs, size_t n_devs,
                                                     ggml_backend_meta_get_split_state_t get_split_state,
                                                     void * get_split_state_ud);

// Collective communication a backend family may offer the meta backend,
// found with ggml_backend_reg_get_proc_address under the names
// "ggml_backend_comm_init", "ggml_backend_comm_free" and
// "ggml_backend_comm_allreduce_tensor". comm_init returns NULL when it cannot
// serve these backends; allreduce sums tensors[0..n_backends) (one per
// backend, same shape) into each of them, ordered in each backend's stream
// after the computations issued before it (the meta backend does not
// synchronize its members first), and returns false, having changed
// nothing, when it does not take the tensors.
typedef void * (*ggml_backend_comm_init_t)(ggml_backend_t * backends, size_t n_backends);
typedef void (*ggml_backend_comm_free_t)(void * comm_ctx);
typedef bool (*ggml_backend_comm_allreduce_tensor_t)(void * comm_ctx, struct ggml_tensor ** tensors);

#ifdef __cplusplus
}
#endif

#include "ggml-backend-sched.h"
