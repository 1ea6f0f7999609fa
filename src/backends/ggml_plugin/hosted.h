#pragma once

// A ggml 0.25.1 backend plugin hosted as a loom backend family: each object
// of the plugin (reg, device, buffer type, buffer, backend, event) is wrapped
// by a loom object of the same concept that calls the plugin's functions.
//
// Note [Foreign handles]
// A pointer to one of the plugin's structs (ggml_abi::*) never reaches loom
// code as a loom object, and a loom object never reaches the plugin. The
// wrappers keep the foreign pointer and hand the plugin copies of loom's
// tensors and graphs ("shadows", shadow.h) whose buffer fields point at the
// plugin's own buffers. Functions the plugin offers through
// get_proc_address are offered only where loom can translate their handles
// (proc_address in hosted_reg.cpp). Foreign buffer types appear once each as
// loom objects, made on first sight and kept by the reg, so that the same
// plugin buffer type always maps to the same loom handle.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "abi.h"
#include "backend/backend_impl.h"

namespace loom::ggml_plugin {

class HostedDevice;
class HostedBufferType;

// The shared libraries of a plugin: the plugin and the libggml-base it
// binds to. Opened with RTLD_DEEPBIND; never closed once a reg is made.
struct PluginLibraries {
    void * base   = nullptr; // libggml-base.so beside the plugin, when there is one
    void * plugin = nullptr;
};

class HostedReg final : public ggml_backend_reg {
  public:
    HostedReg(PluginLibraries libs, ggml_abi::Reg * reg, ggml_abi::BufferFreeFn buffer_free);
    ~HostedReg() override;

    // The loom family of the plugin's reg, made on first sight (then *fresh
    // is set) and kept for the life of the process: the same plugin reg
    // always maps to the same loom reg. libs are the libraries the reg
    // comes from, kept open by the reg made first.
    static HostedReg * of(PluginLibraries libs, ggml_abi::Reg * reg, ggml_abi::BufferFreeFn buffer_free,
                          bool * fresh = nullptr);

    const char *          name() const override { return name_.c_str(); }
    size_t                device_count() const override { return devices_.size(); }
    ggml_backend_device * device(size_t index) override;
    void *                proc_address(const char * fn_name) override;

    ggml_abi::Reg * foreign() const { return reg_; }
    // The plugin's function of that name, or NULL.
    void *          foreign_proc(const char * fn_name) const;
    // The loom object of a buffer type of this plugin (NULL for NULL). Its
    // device is the plugin's device of it or, where the plugin names none
    // (ggml's CPU buffer type does not), from: the device that handed it out.
    HostedBufferType * wrap(ggml_abi::BufferType * buft, HostedDevice * from);
    HostedDevice *     device_of(const ggml_abi::Device * dev) const;
    // Frees a buffer of the plugin the way its libggml-base does.
    void               free_buffer(ggml_abi::Buffer * buffer) const { buffer_free_(buffer); }
    // A reg the plugin made at run time (ggml's RPC plugin: one per server)
    // as a loom family of the same libraries.
    HostedReg *        adopt(ggml_abi::Reg * reg) const { return of(libs_, reg, buffer_free_); }

  private:
    PluginLibraries                                                     libs_;
    ggml_abi::Reg *                                                     reg_;
    ggml_abi::BufferFreeFn                                              buffer_free_;
    std::string                                                         name_;
    std::vector<std::unique_ptr<HostedDevice>>                          devices_;
    std::mutex                                                          mutex_;
    std::map<ggml_abi::BufferType *, std::unique_ptr<HostedBufferType>> bufts_;
};

class HostedDevice final : public ggml_backend_device {
  public:
    HostedDevice(HostedReg * reg, ggml_abi::Device * dev);

    const char *               name() const override { return name_.c_str(); }
    const char *               description() const override;
    void                       memory(size_t * free, size_t * total) const override;
    enum ggml_backend_dev_type type() const override;
    ggml_backend_dev_caps      caps() const override;
    const char *               device_id() const override;

    ggml_backend *             init_backend(const char * params) override;
    ggml_backend_buffer_type * buffer_type() override;
    ggml_backend_buffer_type * host_buffer_type() override;
    ggml_backend_buffer *      buffer_from_host_ptr(void * ptr, size_t size, size_t max_tensor_size) override;

    bool supports_op(const ggml_tensor * op) const override;
    bool supports_buft(const ggml_backend_buffer_type * buft) const override;
    bool offload_op(const ggml_tensor * op) const override;

    ggml_backend_event * event_new() override;
    void                 event_synchronize(ggml_backend_event * event) override;

    // The plugin's extra buffer types as loom objects, NULL-terminated
    // (ggml_backend_dev_get_extra_bufts).
    ggml_backend_buffer_type ** extra_bufts();

    HostedReg &         hosted_reg() const { return *hreg_; }
    ggml_abi::Device *  foreign() const { return dev_; }

  private:
    ggml_backend_dev_props props() const;

    HostedReg *                             hreg_;
    ggml_abi::Device *                      dev_;
    std::string                             name_;
    std::mutex                              extra_mutex_;
    std::vector<ggml_backend_buffer_type *> extra_;
};

class HostedBufferType final : public ggml_backend_buffer_type {
  public:
    HostedBufferType(HostedReg * reg, ggml_abi::BufferType * buft, HostedDevice * dev);

    const char *          name() const override { return name_.c_str(); }
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    size_t                alignment() const override;
    size_t                max_size() const override;
    size_t                alloc_size(const ggml_tensor * t) const override;
    bool                  is_host() const override;
    bool                  needs_init_tensor() const override { return true; }

    HostedReg &            hosted_reg() const { return *hreg_; }
    ggml_abi::BufferType * foreign() const { return buft_; }

  private:
    HostedReg *            hreg_;
    ggml_abi::BufferType * buft_;
    std::string            name_;
};

// Takes ownership of the plugin's buffer, of which it shows size_bytes.
class HostedBuffer final : public ggml_backend_buffer {
  public:
    HostedBuffer(HostedBufferType * type, ggml_abi::Buffer * buffer, size_t size_bytes);
    ~HostedBuffer() override;

    void *      base() override;
    ggml_status init_tensor(ggml_tensor * t) override;
    void        set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void        get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    void        memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;
    void        set_tensor_2d(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                              size_t stride_tensor, size_t stride_data) override;
    void        get_tensor_2d(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                              size_t stride_tensor, size_t stride_data) override;
    bool        cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override;
    void        clear(uint8_t value) override;
    void        reset() override;
    void        set_usage(ggml_backend_buffer_usage u) override;

    HostedReg &        hosted_reg() const { return static_cast<HostedBufferType *>(buft)->hosted_reg(); }
    ggml_abi::Buffer * foreign() const { return buf_; }

  private:
    ggml_abi::Buffer * buf_;
};

class HostedEvent final : public ggml_backend_event {
  public:
    HostedEvent(HostedDevice * dev, ggml_abi::Event * event) : ggml_backend_event(dev), event_(event) {}
    ~HostedEvent() override;

    ggml_abi::Event * foreign() const { return event_; }

  private:
    ggml_abi::Event * event_;
};

class ShadowGraph;

// Takes ownership of the plugin's backend.
class HostedBackend final : public ggml_backend {
  public:
    HostedBackend(HostedDevice * dev, ggml_abi::Backend * backend);
    ~HostedBackend() override;

    const char * name() const override { return name_.c_str(); }
    void         set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void         get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    bool         cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) override;
    void         synchronize() override;
    void         event_record(ggml_backend_event * event) override;
    void         event_wait(ggml_backend_event * event) override;
    ggml_status  graph_compute(ggml_cgraph * graph) override;

    HostedReg &         hosted_reg() const { return static_cast<HostedDevice *>(device)->hosted_reg(); }
    ggml_abi::Backend * foreign() const { return backend_; }

  private:
    ggml_abi::Backend * backend_;
    std::string         name_;
    // The shadows of the graphs given to the plugin, by the loom graph's
    // array of nodes (a scheduler's split keeps its array): built again in
    // place for each computation, so that the plugin sees the same shadows
    // for the same graph (Note [Shadow graphs] in shadow.cpp). A plugin whose
    // graph_compute returns early may read a graph until synchronize, which
    // keeps the k_kept_graphs used last.
    static constexpr size_t k_kept_graphs = 64;
    std::unordered_map<ggml_tensor * const *, std::unique_ptr<ShadowGraph>> graphs_;
    uint64_t                                                                 n_computed_ = 0;
};

// The plugin's buffer behind a loom buffer, when that is a buffer of reg.
ggml_abi::Buffer * foreign_buffer(const ggml_backend_buffer * buffer, const HostedReg & reg);

} // namespace loom::ggml_plugin
