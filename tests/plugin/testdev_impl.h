#pragma once

// The classes of the test device plugin (see testdev_api.h).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_impl.h"
#include "core/graph.h"

namespace testdev {

// Logs through the callback installed with ggml_log_set.
void log(ggml_log_level level, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

// Aborts naming the function: for broken preconditions and internal bugs.
[[noreturn]] void fail(const char * func, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

class Device;

// Set of op names as ggml_op_desc prints them; "*" stands for every op.
class OpSet {
  public:
    static bool parse(const char * list, OpSet * out);
    bool        contains(const ggml_tensor * op) const;
    bool        all = false;

  private:
    std::set<std::string> names_;
};

struct Settings {
    OpSet  ops;
    OpSet  offload_ops;
    size_t max_buffer_size = SIZE_MAX;
    size_t memory          = size_t(1) << 30;
    bool   set_extra       = false;

    static Settings defaults() {
        Settings s;
        s.ops.all = true;
        return s;
    }
};

class BufferType final : public ggml_backend_buffer_type {
  public:
    explicit BufferType(Device * dev);

    const char *          name() const override;
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    size_t                alignment() const override { return 128; }
    size_t                max_size() const override;
    // Rounded up to whole 256-byte blocks, so that allocators meet a type
    // whose sizes exceed ggml_nbytes.
    size_t alloc_size(const ggml_tensor * t) const override;
    bool   needs_init_tensor() const override { return true; }
};

// Device memory: a private host array behind a fake, never-mapped address.
class Buffer final : public ggml_backend_buffer {
  public:
    Buffer(BufferType * type, size_t size);
    ~Buffer() override;

    void * base() override { return reinterpret_cast<void *>(base_); }
    // Zeroes the padding after a tensor's data (up to alloc_size), as
    // devices that pad tensors do so that kernels reading whole blocks see
    // zeros; aborts when the padding is not inside this buffer.
    ggml_status init_tensor(ggml_tensor * t) override;
    void   set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void   get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    void   memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;
    bool   cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override;
    void   clear(uint8_t value) override;

    Device * device() const;
    // The real location of n bytes at a device address; NULL when they are
    // not all inside this buffer.
    uint8_t * host_address(const void * device_address, size_t n);
    // Transfers at device addresses, aborting when they leave the buffer.
    void write(void * device_address, const void * data, size_t n);
    void read(const void * device_address, void * data, size_t n);

  private:
    uintptr_t            base_;
    std::vector<uint8_t> storage_;
};

// The buffer holding t's data when it is a buffer of this plugin; NULL otherwise.
Buffer * buffer_of(const ggml_tensor * t);

class Event final : public ggml_backend_event {
  public:
    using ggml_backend_event::ggml_backend_event;

    // A new point to wait for; mark_done(point) completes it.
    uint64_t next_point();
    uint64_t last_point();
    void     mark_done(uint64_t point);
    void     wait_for(uint64_t point);

  private:
    std::mutex              mutex_;
    std::condition_variable cv_;
    uint64_t                recorded_ = 0;
    uint64_t                done_     = 0;
};

class Device final : public ggml_backend_device {
  public:
    Device(ggml_backend_reg * reg, int index);

    const char *               name() const override { return name_.c_str(); }
    const char *               description() const override { return description_.c_str(); }
    void                       memory(size_t * free, size_t * total) const override;
    enum ggml_backend_dev_type type() const override { return GGML_BACKEND_DEVICE_TYPE_GPU; }
    ggml_backend_dev_caps      caps() const override;

    ggml_backend *             init_backend(const char * params) override;
    ggml_backend_buffer_type * buffer_type() override { return &buft_; }

    bool supports_op(const ggml_tensor * op) const override;
    bool supports_buft(const ggml_backend_buffer_type * buft) const override { return buft == &buft_; }
    bool offload_op(const ggml_tensor * op) const override;

    ggml_backend_event * event_new() override;
    void                 event_synchronize(ggml_backend_event * event) override;

    bool     configure(const char * key, const char * value);
    Settings settings() const;

    // What the last graph given to a backend of this device looked like
    // (loom_testdev_last_graph).
    void   record_graph(const ggml_cgraph * graph);
    size_t last_graph(uint64_t * uid, ggml_tensor ** nodes, int32_t * use_counts, size_t capacity) const;

    // Device memory accounting; false when size bytes are not free.
    bool take_memory(size_t size);
    void give_back_memory(size_t size);

  private:
    std::string         name_;
    std::string         description_;
    BufferType          buft_;
    mutable std::mutex  mutex_;
    Settings            settings_ = Settings::defaults();
    std::atomic<size_t> used_{0};
    uint64_t                   last_uid_ = 0;
    std::vector<ggml_tensor *> last_nodes_;
    std::vector<int32_t>       last_use_counts_;
};

// A stream: a worker thread running queued work in order.
class Stream {
  public:
    Stream();
    ~Stream();
    void enqueue(std::function<void()> work);
    // Returns once everything queued so far has run.
    void drain();

  private:
    void main();

    std::mutex                        mutex_;
    std::condition_variable           cv_;
    std::deque<std::function<void()>> queue_;
    bool                              busy_ = false;
    bool                              stop_ = false;
    std::thread                       thread_;
};

class Backend final : public ggml_backend {
  public:
    explicit Backend(Device * dev);
    ~Backend() override;

    const char * name() const override { return device->name(); }

    void set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    bool cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) override;
    void synchronize() override;

    void event_record(ggml_backend_event * event) override;
    void event_wait(ggml_backend_event * event) override;

    ggml_status graph_compute(ggml_cgraph * graph) override;

  private:
    // Runs the nodes with the CPU kernels directly on device memory.
    void run(const std::vector<ggml_tensor *> & nodes);

    ggml_backend * cpu_; // the kernels; used by the stream's thread only
    Stream         stream_;
};

} // namespace testdev
