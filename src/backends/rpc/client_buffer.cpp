// The RPC client's remote buffers (client_buffer.h).

#include "client_buffer.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "core/common.h"
#include "validate.h"

namespace loom::rpc {

uint8_t * reserve_addresses(size_t size, size_t alignment) {
    static std::atomic<uintptr_t> next{uintptr_t(1) << 44};
    const uintptr_t               align = std::max<size_t>(alignment, 4096);
    const uintptr_t               span  = (uintptr_t(size) + 2 * align - 1) / align * align;
    const uintptr_t               at    = next.fetch_add(span + align);
    return reinterpret_cast<uint8_t *>((at + align - 1) / align * align);
}

size_t RpcBufferType::alloc_size(const ggml_tensor * t) const {
    AllocSizeRequest req;
    req.set_device(index_);
    TensorDesc * d = req.mutable_tensor();
    d->set_type(uint32_t(t->type));
    for (int i = 0; i < 4; ++i) {
        d->add_ne(t->ne[i]);
        d->add_nb(t->nb[i]);
    }
    d->set_op(uint32_t(t->op));
    std::string key;
    req.SerializeToString(&key);
    {
        std::lock_guard<std::mutex> lock(sizes_mutex_);
        if (auto it = sizes_.find(key); it != sizes_.end()) {
            return it->second;
        }
    }
    grpc::ClientContext ctx;
    conn_->prepare(ctx);
    AllocSizeReply rep;
    if (!conn_->check(conn_->stub().GetAllocSize(&ctx, req, &rep), "GetAllocSize", false)) {
        return ggml_nbytes(t);
    }
    std::lock_guard<std::mutex> lock(sizes_mutex_);
    sizes_[key] = size_t(rep.size());
    return size_t(rep.size());
}
ggml_backend_buffer * RpcBufferType::alloc_buffer(size_t size) {
    AllocBufferRequest req;
    req.set_device(index_);
    req.set_size(size);
    grpc::ClientContext ctx;
    conn_->prepare(ctx);
    AllocBufferReply rep;
    // A refusal is the caller's answer (NULL), not a failed transfer.
    if (!conn_->check(conn_->stub().AllocBuffer(&ctx, req, &rep), "AllocBuffer", false)) {
        return nullptr;
    }
    return new RpcBuffer(this, *conn_, rep.buffer(), size);
}

RpcBuffer::~RpcBuffer() {
    grpc::ClientContext ctx;
    conn_.prepare(ctx);
    BufferRequest req;
    req.set_buffer(handle_);
    Empty rep;
    conn_.check(conn_.stub().FreeBuffer(&ctx, req, &rep), "FreeBuffer");
    conn_.forget_graphs(); // the server drops its graphs with any buffer
}

void RpcBuffer::describe(const ggml_tensor * t, TensorDesc * d) const {
    d->set_buffer(handle_);
    d->set_offset(uint64_t(static_cast<const uint8_t *>(t->data) - base_));
    d->set_type(uint32_t(t->type));
    for (int i = 0; i < 4; ++i) {
        d->add_ne(t->ne[i]);
        d->add_nb(t->nb[i]);
    }
}

void RpcBuffer::set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) {
    const auto * bytes = static_cast<const uint8_t *>(data);
    // Compute buffers hold activations that never repeat: no cache.
    const bool cached =
        conn_.content_cache() && n >= k_hash_threshold && usage != GGML_BACKEND_BUFFER_USAGE_COMPUTE;
    if (cached && set_by_hash(t, bytes, offset, n)) {
        return;
    }
    TensorDesc desc;
    describe(t, &desc);
    if (BulkChannel * bulk = conn_.bulk(); bulk != nullptr && bulk->set(desc, offset, bytes, n)) {
        if (cached) {
            store(t, offset, n);
        }
        return;
    }
    // One request (and its data string) for every chunk: fresh 8 MiB
    // allocations each cost page faults.
    SetTensorRequest req;
    *req.mutable_tensor() = desc;
    for (size_t done = 0; done < n;) {
        const size_t part = std::min(k_chunk_bytes, n - done);
        req.set_offset(offset + done);
        req.set_data(bytes + done, part);
        grpc::ClientContext ctx;
        conn_.prepare(ctx);
        Empty rep;
        if (!conn_.check(conn_.stub().SetTensor(&ctx, req, &rep), "SetTensor")) {
            return;
        }
        done += part;
    }
    if (cached) {
        store(t, offset, n);
    }
}

void RpcBuffer::get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) {
    auto * bytes = static_cast<uint8_t *>(data);
    GetTensorRequest req;
    describe(t, req.mutable_tensor());
    if (BulkChannel * bulk = conn_.bulk(); bulk != nullptr) {
        const grpc::Status st = bulk->get(req.tensor(), offset, bytes, n);
        if (st.ok() || conn_.bulk() != nullptr) {
            conn_.check(st, "GetTensor");
            return;
        }
        // The connection broke: again through gRPC.
    }
    GetTensorReply rep;
    for (size_t done = 0; done < n;) {
        const size_t part = std::min(k_chunk_bytes, n - done);
        req.set_offset(offset + done);
        req.set_size(part);
        grpc::ClientContext ctx;
        conn_.prepare(ctx);
        if (!conn_.check(conn_.stub().GetTensor(&ctx, req, &rep), "GetTensor")) {
            return;
        }
        if (rep.data().size() != part) {
            LOOM_LOG_ERROR("RPC[%s]: GetTensor returned %zu bytes instead of %zu\n", conn_.endpoint().c_str(),
                           rep.data().size(), part);
            return;
        }
        std::memcpy(bytes + done, rep.data().data(), part);
        done += part;
    }
}

ggml_status RpcBuffer::init_tensor(ggml_tensor * t) {
    if (!buft->needs_init_tensor() || t->view_src != nullptr) {
        return GGML_STATUS_SUCCESS;
    }
    InitTensorRequest req;
    describe(t, req.mutable_tensor());
    req.mutable_tensor()->set_op(uint32_t(t->op));
    if (BulkChannel * bulk = conn_.bulk(); bulk != nullptr && bulk->call(bulk::Op::init, req, nullptr, 0).ok()) {
        return GGML_STATUS_SUCCESS;
    }
    grpc::ClientContext ctx;
    conn_.prepare(ctx);
    Empty rep;
    return conn_.check(conn_.stub().InitTensor(&ctx, req, &rep), "InitTensor") ? GGML_STATUS_SUCCESS
                                                                              : GGML_STATUS_FAILED;
}

void RpcBuffer::memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) {
    MemsetTensorRequest req;
    describe(t, req.mutable_tensor());
    req.set_offset(offset);
    req.set_size(n);
    req.set_value(value);
    grpc::ClientContext ctx;
    conn_.prepare(ctx);
    Empty rep;
    conn_.check(conn_.stub().MemsetTensor(&ctx, req, &rep), "MemsetTensor");
}

bool RpcBuffer::cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) {
    auto * sb = dynamic_cast<RpcBuffer *>(src->buffer);
    if (sb == nullptr || &sb->conn_ != &conn_) {
        return false;
    }
    CopyTensorRequest req;
    sb->describe(src, req.mutable_src());
    describe(dst, req.mutable_dst());
    grpc::ClientContext ctx;
    conn_.prepare(ctx);
    CopyTensorReply rep;
    return conn_.check(conn_.stub().CopyTensor(&ctx, req, &rep), "CopyTensor") && rep.copied();
}

void RpcBuffer::clear(uint8_t value) {
    ClearBufferRequest req;
    req.set_buffer(handle_);
    req.set_value(value);
    grpc::ClientContext ctx;
    conn_.prepare(ctx);
    Empty rep;
    conn_.check(conn_.stub().ClearBuffer(&ctx, req, &rep), "ClearBuffer");
}

Transfer2d RpcBuffer::transfer_2d(const ggml_tensor * t, size_t offset, size_t n, size_t n_copies, size_t stride) const {
    Transfer2d req;
    describe(t, req.mutable_tensor());
    req.set_offset(offset);
    req.set_block(n);
    req.set_count(n_copies);
    req.set_stride(stride);
    return req;
}

bool RpcBuffer::set_by_hash(ggml_tensor * t, const uint8_t * bytes, size_t offset, size_t n) {
    SetTensorHashRequest req = hash_request(t, offset, n);
    const Sha256         probe = content_probe(bytes, n);
    req.set_probe(probe.data(), probe.size());
    SetTensorHashReply rep;
    if (!hash_call(req, &rep) || !rep.probe_known()) {
        return false;
    }
    // With the probe, which narrows what the server hashes (Note
    // [Content cache keys] in content_cache.h).
    const Sha256 key = content_key(bytes, n);
    req.set_sha256(key.data(), key.size());
    return hash_call(req, &rep) && rep.found();
}

void RpcBuffer::store(const ggml_tensor * t, size_t offset, size_t n) {
    SetTensorHashRequest req = hash_request(t, offset, n);
    req.set_store(true);
    hash_call(req, nullptr);
}

SetTensorHashRequest RpcBuffer::hash_request(const ggml_tensor * t, size_t offset, size_t n) const {
    SetTensorHashRequest req;
    describe(t, req.mutable_tensor());
    req.set_offset(offset);
    req.set_size(n);
    return req;
}

bool RpcBuffer::hash_call(const SetTensorHashRequest & req, SetTensorHashReply * rep) {
    if (BulkChannel * bulk = conn_.bulk(); bulk != nullptr) {
        return conn_.check(bulk->call(bulk::Op::hash, req, rep, ClientConfig::get().call_timeout()),
                           "SetTensorHash");
    }
    grpc::ClientContext ctx;
    conn_.prepare(ctx);
    SetTensorHashReply ignored;
    return conn_.check(conn_.stub().SetTensorHash(&ctx, req, rep != nullptr ? rep : &ignored), "SetTensorHash");
}

void RpcBuffer::set_tensor_2d(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                              size_t stride_tensor, size_t stride_data) {
    if (BulkChannel * bulk = conn_.bulk(); bulk != nullptr) {
        const Transfer2d req = transfer_2d(t, offset, n, n_copies, stride_tensor);
        if (bulk->set_2d(req, data, stride_data)) {
            return;
        }
    }
    ggml_backend_buffer::set_tensor_2d(t, data, offset, n, n_copies, stride_tensor, stride_data);
}

void RpcBuffer::get_tensor_2d(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                              size_t stride_tensor, size_t stride_data) {
    if (BulkChannel * bulk = conn_.bulk(); bulk != nullptr) {
        const grpc::Status st = bulk->get_2d(transfer_2d(t, offset, n, n_copies, stride_tensor), data, stride_data);
        if (st.ok() || conn_.bulk() != nullptr) {
            conn_.check(st, "GetTensor2d");
            return;
        }
        // The connection broke: again through gRPC.
    }
    ggml_backend_buffer::get_tensor_2d(t, data, offset, n, n_copies, stride_tensor, stride_data);
}

} // namespace loom::rpc
