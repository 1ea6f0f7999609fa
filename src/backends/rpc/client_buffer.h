#pragma once

// The RPC client's remote buffers: a buffer type per remote device, and
// buffers whose tensors have addresses in a range reserved per buffer
// (never dereferenced), so that a tensor's offset in its buffer is data -
// base, as on the server. client.cpp holds the devices and backends.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/backend_impl.h"
#include "client_connection.h"
#include "loom_rpc.grpc.pb.h"
#include "protocol.h"

namespace loom::rpc {

// Address ranges of remote buffers: never dereferenced, distinct per buffer.
uint8_t * reserve_addresses(size_t size, size_t alignment);

class RpcBufferType final : public ggml_backend_buffer_type {
  public:
    RpcBufferType(ggml_backend_device * dev, std::shared_ptr<Connection> conn, uint32_t index, std::string name,
                  const DeviceInfo & info)
        : ggml_backend_buffer_type(dev), conn_(std::move(conn)), index_(index), name_(std::move(name)),
          alignment_(size_t(info.alignment())), max_size_(size_t(info.max_size())),
          needs_init_(info.init_tensor()) {}

    const char * name() const override { return name_.c_str(); }
    size_t       alignment() const override { return alignment_; }
    size_t       max_size() const override { return max_size_; }
    // As the server's device says.
    bool         needs_init_tensor() const override { return needs_init_; }
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    // The server's answer, asked once per shape (cached); the data's size
    // when the server cannot be asked.
    size_t alloc_size(const ggml_tensor * t) const override;

    Connection & conn() const { return *conn_; }

  private:
    std::shared_ptr<Connection>                     conn_;
    uint32_t                                        index_;
    std::string                                     name_;
    size_t                                          alignment_;
    size_t                                          max_size_;
    bool                                            needs_init_;
    mutable std::mutex                              sizes_mutex_;
    mutable std::unordered_map<std::string, size_t> sizes_;
};

class RpcBuffer final : public ggml_backend_buffer {
  public:
    RpcBuffer(RpcBufferType * type, Connection & conn, uint64_t handle, size_t size)
        : ggml_backend_buffer(type, size), conn_(conn), handle_(handle),
          base_(reserve_addresses(size, type->alignment())) {}
    ~RpcBuffer() override;

    void * base() override { return base_; }

    uint64_t     handle() const { return handle_; }
    Connection & conn() const { return conn_; }

    // The description of t (in this buffer) the server checks.
    void describe(const ggml_tensor * t, TensorDesc * d) const;

    void set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;

    void get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;

    // One frame on the bulk connection; without one, a call per block.
    void set_tensor_2d(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                       size_t stride_tensor, size_t stride_data) override;
    void get_tensor_2d(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                       size_t stride_tensor, size_t stride_data) override;

    // On the server, for devices that need it (views share their source's
    // memory, which was initialised with the source). Through the bulk
    // connection the call is not waited for: a refusal fails the next
    // graph computation, like a refused upload.
    ggml_status init_tensor(ggml_tensor * t) override;

    void memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;

    bool cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override;

    void clear(uint8_t value) override;

  private:
    Transfer2d transfer_2d(const ggml_tensor * t, size_t offset, size_t n, size_t n_copies, size_t stride) const;

    // Asks the server to fill the range from its content cache: by probe
    // first (64 KiB hashed), and by the full key only when the server knows
    // the probe, so new content is not hashed whole before it is sent.
    bool set_by_hash(ggml_tensor * t, const uint8_t * bytes, size_t offset, size_t n);
    // After an upload: the server keeps the range's content under the key it
    // computes (through the bulk connection this is not waited for).
    void store(const ggml_tensor * t, size_t offset, size_t n);
    SetTensorHashRequest hash_request(const ggml_tensor * t, size_t offset, size_t n) const;
    // rep NULL: not waited for where the transport allows it.
    bool hash_call(const SetTensorHashRequest & req, SetTensorHashReply * rep);

    Connection &    conn_;
    const uint64_t  handle_;
    uint8_t * const base_;
};

} // namespace loom::rpc
