#pragma once

// The objects behind the opaque handles of ggml-backend.h. Each concept is
// an abstract class; optional capabilities have default implementations, so
// a backend overrides only what it has. The C functions in this folder check
// their arguments and make one call into these objects.
//
// The structs are named as ggml's handles so a handle is a pointer to the
// C++ object itself (no casts, no wrapper allocation).
//
// Backend plugins (see ggml_backend_load) derive from these classes, so
// their layout and virtual tables are part of the plugin ABI: any change
// here must bump LOOM_BACKEND_API_VERSION in ggml-backend.h.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/op_table.h"
#include "ggml-backend.h"

// Plugins see operator numbers in the graphs they compute: the API version
// belongs to one operator table (core/op_table.h). A change to the table
// stops the build here until LOOM_BACKEND_API_VERSION is bumped and the
// fingerprint updated.
static_assert(LOOM_BACKEND_API_VERSION == 3 && loom::op_table_fingerprint() == 0xba27ff98240e64cbull,
              "the operator table changed: bump LOOM_BACKEND_API_VERSION and update this fingerprint");

// Keeps the classes' type information and virtual tables visible to plugins
// even if libloom is ever built with hidden visibility.
#define LOOM_BACKEND_CLASS __attribute__((visibility("default")))

struct LOOM_BACKEND_CLASS ggml_backend_buffer_type {
    explicit ggml_backend_buffer_type(ggml_backend_device * dev) : device(dev) {}
    virtual ~ggml_backend_buffer_type() = default;

    virtual const char * name() const = 0;
    // NULL (with a logged reason) when the memory cannot be had.
    virtual ggml_backend_buffer * alloc_buffer(size_t size) = 0;
    virtual size_t alignment() const = 0;
    virtual size_t max_size() const { return SIZE_MAX; }
    virtual size_t alloc_size(const ggml_tensor * t) const { return ggml_nbytes(t); }
    virtual bool   is_host() const { return false; }
    // True when buffers of this type do work in init_tensor (they pad the
    // tensor or keep state for it): an RPC server then tells its clients,
    // which forward init_tensor to it.
    virtual bool   needs_init_tensor() const { return false; }

    ggml_backend_device * const device;
};

struct LOOM_BACKEND_CLASS ggml_backend_buffer {
    ggml_backend_buffer(ggml_backend_buffer_type * type, size_t size_bytes) : buft(type), size(size_bytes) {}
    virtual ~ggml_backend_buffer() = default;

    // Address of the first byte as tensors see it (a device address for non-host memory).
    virtual void *      base() = 0;
    virtual ggml_status init_tensor(ggml_tensor * t) {
        (void) t;
        return GGML_STATUS_SUCCESS;
    }
    virtual void set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n)       = 0;
    virtual void get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n)       = 0;
    virtual void memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n)        = 0;
    // n_copies blocks of n bytes: block i at offset + i * stride_tensor of
    // t's data and at i * stride_data of data. The caller checked every
    // block against t (check_2d). The defaults copy one block at a time.
    virtual void set_tensor_2d(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                               size_t stride_tensor, size_t stride_data);
    virtual void get_tensor_2d(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                               size_t stride_tensor, size_t stride_data);
    // Copies between buffers without staging when this buffer knows how; false otherwise.
    virtual bool cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) {
        (void) src;
        (void) dst;
        return false;
    }
    virtual void clear(uint8_t value) = 0;
    virtual void reset() {}
    virtual void set_usage(ggml_backend_buffer_usage u) { usage = u; }

    ggml_backend_buffer_type * const buft;
    const size_t                     size;
    ggml_backend_buffer_usage        usage = GGML_BACKEND_BUFFER_USAGE_ANY;
};

// An event marks a point in a backend's stream. Devices without events never
// create one (ggml_backend_event_new returns NULL for them).
struct LOOM_BACKEND_CLASS ggml_backend_event {
    explicit ggml_backend_event(ggml_backend_device * dev) : device(dev) {}
    virtual ~ggml_backend_event() = default;

    ggml_backend_device * const device;
};

struct LOOM_BACKEND_CLASS ggml_backend {
    ggml_backend(ggml_guid_t id, ggml_backend_device * dev) : guid(id), device(dev) {}
    virtual ~ggml_backend() = default;

    virtual const char * name() const = 0;

    // Asynchronous transfers; the defaults are synchronous.
    virtual void set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n);
    virtual void get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n);
    // 2D transfers as ggml_backend_buffer::set_tensor_2d; the defaults make
    // one asynchronous transfer per block.
    virtual void set_tensor_2d_async(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                                     size_t stride_tensor, size_t stride_data);
    virtual void get_tensor_2d_async(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                                     size_t stride_tensor, size_t stride_data);
    // Copies src (of backend_src) to dst (of this backend) on this stream; false when not possible.
    virtual bool cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) {
        (void) backend_src;
        (void) src;
        (void) dst;
        return false;
    }
    virtual void synchronize() {}
    // The outcome of the computations graph_compute left running, known once
    // synchronize returned: the first failure since the last call, which
    // clears it; SUCCESS when none. A backend whose graph_compute reports
    // every failure itself has nothing to add.
    virtual ggml_status take_async_status() { return GGML_STATUS_SUCCESS; }

    // Events. The defaults suit a backend that can wait for its own stream:
    // recording finishes the stream, so the event is complete as soon as it
    // is recorded; waiting blocks the host until the event's device says the
    // event is complete. Backends with real streams enqueue both instead.
    virtual void event_record(ggml_backend_event * event);
    virtual void event_wait(ggml_backend_event * event);

    // Plans: the default plan remembers the graph and computes it as is.
    virtual ggml_backend_graph_plan_t graph_plan_create(ggml_cgraph * graph);
    virtual void                      graph_plan_free(ggml_backend_graph_plan_t plan);
    virtual ggml_status               graph_plan_compute(ggml_backend_graph_plan_t plan);

    // May return before the computation ends (see synchronize).
    virtual ggml_status graph_compute(ggml_cgraph * graph) = 0;

    ggml_guid_t const           guid;
    ggml_backend_device * const device;
};

struct LOOM_BACKEND_CLASS ggml_backend_device {
    explicit ggml_backend_device(ggml_backend_reg * r) : reg(r) {}
    virtual ~ggml_backend_device() = default;

    virtual const char *          name() const                               = 0;
    virtual const char *          description() const                        = 0;
    virtual void                  memory(size_t * free, size_t * total) const = 0;
    virtual enum ggml_backend_dev_type type() const                               = 0;
    virtual ggml_backend_dev_caps caps() const {
        ggml_backend_dev_caps c{};
        c.mmap_support = true;
        return c;
    }
    virtual const char *          device_id() const { return nullptr; }

    // NULL (logged) when the backend cannot be created.
    virtual ggml_backend *             init_backend(const char * params) = 0;
    virtual ggml_backend_buffer_type * buffer_type()                     = 0;
    virtual ggml_backend_buffer_type * host_buffer_type() { return nullptr; }
    virtual ggml_backend_buffer *      buffer_from_host_ptr(void * ptr, size_t size, size_t max_tensor_size) {
        (void) ptr;
        (void) size;
        (void) max_tensor_size;
        return nullptr;
    }

    virtual bool supports_op(const ggml_tensor * op) const                = 0;
    virtual bool supports_buft(const ggml_backend_buffer_type * buft) const = 0;
    virtual bool offload_op(const ggml_tensor * op) const {
        (void) op;
        return false;
    }

    // Events: none by default. A device that creates events also reports
    // caps().events and blocks in event_synchronize until the event is done.
    virtual ggml_backend_event * event_new() { return nullptr; }
    virtual void                 event_synchronize(ggml_backend_event * event) { (void) event; }

    ggml_backend_reg * const reg;
};

struct LOOM_BACKEND_CLASS ggml_backend_reg {
    virtual ~ggml_backend_reg() = default;

    virtual const char *          name() const          = 0;
    virtual size_t                device_count() const  = 0;
    virtual ggml_backend_device * device(size_t index)  = 0;
    virtual void *                proc_address(const char * fn_name) {
        (void) fn_name;
        return nullptr;
    }
};

namespace loom {

// Hosting of ggml 0.25.1's own backend plugins (src/backends/ggml_plugin),
// for the loader, which hands it the libraries that are not loom plugins.
// The reg of the plugin at path as a loom family (its devices named
// "ggml:<name>"), which lives as long as the process; NULL with *why set
// when the file is not a ggml plugin of API version 2, cannot run here, or
// this build cannot host plugins (a sanitizer build).
ggml_backend_reg * host_ggml_plugin(const char * path, std::string * why);
// The ggml_backend_score of the plugin at path (1 when it has none), or 0
// with *why set when it cannot be opened or hosted.
int score_ggml_plugin(const char * path, std::string * why);

// Aborts naming func unless the n_copies blocks of size bytes of a 2D
// transfer, at offset + i * stride_tensor, lie inside tensor (computed
// without overflow). n_copies and size are not 0.
void check_2d(const ggml_tensor * tensor, size_t offset, size_t size, size_t n_copies, size_t stride_tensor,
              const char * func);

// A buffer of host memory: tensor data is reached with plain loads/stores.
// Subclasses decide who owns the memory.
class LOOM_BACKEND_CLASS HostBuffer : public ggml_backend_buffer {
  public:
    HostBuffer(ggml_backend_buffer_type * type, void * data, size_t size_bytes)
        : ggml_backend_buffer(type, size_bytes), data_(data) {}

    void * base() override { return data_; }
    void   set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void   get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    void   memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;
    bool   cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override;
    void   clear(uint8_t value) override;

  protected:
    void * data_;
};

// Several buffers of one type presented as one, for allocations larger than
// the type's maximum buffer size. Tensors live in the parts (their buffer is
// a part); the multi-buffer owns the parts, frees them with itself, and
// passes usage, clear and reset on to each of them.
class LOOM_BACKEND_CLASS MultiBuffer final : public ggml_backend_buffer {
  public:
    // Takes ownership of the parts (all of one buffer type, at least one).
    MultiBuffer(ggml_backend_buffer * const * parts, size_t n_parts);
    ~MultiBuffer() override;

    void * base() override;
    void   set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void   get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    void   memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;
    void   clear(uint8_t value) override;
    void   reset() override;
    void   set_usage(ggml_backend_buffer_usage u) override;

    const std::vector<ggml_backend_buffer *> & parts() const { return parts_; }

  private:
    std::vector<ggml_backend_buffer *> parts_;
};

} // namespace loom
