// libFuzzer target over the RPC server's request handlers, without a
// network: the first byte of an input picks a handler, the rest is parsed
// as that handler's request message (proto/loom_rpc.proto) and handed to
// ServerCore in a fresh session that holds two buffers (handles 1 and 2,
// 4096 and 256 bytes; 1 filled with 0x3c bytes, 2 with zeros). Graphs that pass the checks
// are computed on the CPU, so a check that lets a bad graph through shows
// up as an AddressSanitizer report or an abort.
//
// LOOM_FUZZ_RPC_WRITE_SEEDS=<dir> writes the seed corpus (small valid
// requests of every kind) into dir and exits.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/rpc/server_core.h"
#include "ggml-cpu.h"
#include "ggml.h"

using namespace loom::rpc;

namespace {

void quiet(ggml_log_level, const char *, void *) {}

ServerCore & core() {
    static ServerCore * c = [] {
        ServerOptions o;
        o.devices.push_back(ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0));
        o.n_threads   = 1;
        o.cache_bytes = 1 << 20;
        o.max_session_bytes = 64 << 20;
        return new ServerCore(o);
    }();
    return *c;
}

// LOOM_FUZZ_RPC_VERBOSE=1 prints each handler's status (to check seeds).
bool g_verbose = false;

void report(const grpc::Status & st) {
    if (g_verbose) {
        std::fprintf(stderr, "status %d %s\n", int(st.error_code()), st.error_message().c_str());
    }
}

enum Handler : uint8_t {
    h_memory, h_supports, h_alloc, h_free, h_clear, h_set, h_set_hash, h_get, h_memset, h_copy, h_compute, h_init,
    h_blocks, h_count
};

// The checks of a 2D transfer (bulk frames set_2d / get_2d), the frame
// announcing the blocks' total: the first and the last block, which bound
// all others, are read once they pass.
grpc::Status blocks(Session & s, const Transfer2d & req) {
    uint64_t total = 0;
    if (__builtin_mul_overflow(req.count(), req.block(), &total)) {
        total = 0;
    }
    return core().with_blocks(s, "Blocks", req, total, [&](ggml_tensor & t) {
        if (total > 0) {
            std::string bytes(size_t(req.block()), '\0');
            ggml_backend_tensor_get(&t, bytes.data(), size_t(req.offset()), bytes.size());
            ggml_backend_tensor_get(&t, bytes.data(), size_t(req.offset() + (req.count() - 1) * req.stride()),
                                    bytes.size());
        }
        return grpc::Status::OK;
    });
}

void run(uint8_t which, const uint8_t * data, size_t size) {
    std::string id;
    auto        s = core().open_session(&id);
    {
        AllocBufferRequest a;
        a.set_size(4096);
        AllocBufferReply r;
        core().alloc_buffer(*s, a, &r);
        a.set_size(256);
        core().alloc_buffer(*s, a, &r);
        for (uint64_t h : {1, 2}) {
            ClearBufferRequest c;
            c.set_buffer(h);
            c.set_value(h == 1 ? 0x3c : 0); // small floats in 1; zeros in 2 (valid row indices)
            Empty e;
            core().clear_buffer(*s, c, &e);
        }
    }
#define LOOM_FUZZ_CALL(Req, Rep, fn) \
    { \
        Req req; \
        if (req.ParseFromArray(data, int(size))) { \
            Rep rep; \
            report(core().fn(*s, req, &rep)); \
            report(core().fn(*s, req, &rep)); /* twice: cached graphs, freed handles */ \
        } \
        break; \
    }
    switch (which % h_count) {
        case h_memory: LOOM_FUZZ_CALL(DeviceRequest, DeviceMemory, get_device_memory)
        case h_supports: LOOM_FUZZ_CALL(GraphMessage, Supported, supports_op)
        case h_alloc: LOOM_FUZZ_CALL(AllocBufferRequest, AllocBufferReply, alloc_buffer)
        case h_free: LOOM_FUZZ_CALL(BufferRequest, Empty, free_buffer)
        case h_clear: LOOM_FUZZ_CALL(ClearBufferRequest, Empty, clear_buffer)
        case h_set: LOOM_FUZZ_CALL(SetTensorRequest, Empty, set_tensor)
        case h_set_hash: LOOM_FUZZ_CALL(SetTensorHashRequest, SetTensorHashReply, set_tensor_hash)
        case h_get: LOOM_FUZZ_CALL(GetTensorRequest, GetTensorReply, get_tensor)
        case h_memset: LOOM_FUZZ_CALL(MemsetTensorRequest, Empty, memset_tensor)
        case h_copy: LOOM_FUZZ_CALL(CopyTensorRequest, CopyTensorReply, copy_tensor)
        case h_compute: LOOM_FUZZ_CALL(GraphComputeRequest, GraphComputeReply, graph_compute)
        case h_init: LOOM_FUZZ_CALL(InitTensorRequest, Empty, init_tensor)
        case h_blocks: {
            Transfer2d req;
            if (req.ParseFromArray(data, int(size))) {
                report(blocks(*s, req));
            }
            break;
        }
    }
#undef LOOM_FUZZ_CALL
    core().close_session(id);
}

// ---- seeds -------------------------------------------------------------------

void f32(TensorDesc * d, uint64_t buffer, uint64_t offset, int64_t ne0, int64_t ne1 = 1) {
    d->set_buffer(buffer);
    d->set_offset(offset);
    d->set_type(GGML_TYPE_F32);
    for (int64_t v : {ne0, ne1, int64_t(1), int64_t(1)}) {
        d->add_ne(v);
    }
    for (uint64_t v : {uint64_t(4), uint64_t(4 * ne0), uint64_t(4 * ne0 * ne1), uint64_t(4 * ne0 * ne1)}) {
        d->add_nb(v);
    }
}

void write_seed(const std::string & dir, const char * name, Handler h, const google::protobuf::Message & m) {
    std::string bytes(1, char(h));
    bytes += m.SerializeAsString();
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

// Requests replaying attacks known against ggml's RPC server (each refused
// by loom's; tests/test_rpc_attacks.cpp sends them over the network).
void write_attack_seeds(const std::string & dir) {
    auto seed = [&](const char * name, Handler h, const google::protobuf::Message & m) {
        write_seed(dir, (std::string("attack_") + name).c_str(), h, m);
    };
    {   // CVE-2024-42478 / -42479: ranges outside the buffer or the tensor
        GetTensorRequest g;
        f32(g.mutable_tensor(), 1, 4080, 16);
        g.set_size(16);
        seed("get_past_buffer", h_get, g);
        g.mutable_tensor()->set_offset(0);
        g.set_offset(UINT64_MAX - 3);
        g.set_size(8);
        seed("get_range_wraps", h_get, g);
        SetTensorRequest st;
        f32(st.mutable_tensor(), 2, 240, 16);
        st.set_data(std::string(64, 'x'));
        seed("set_past_buffer", h_set, st);
        MemsetTensorRequest ms;
        f32(ms.mutable_tensor(), 2, 0, 16);
        ms.set_offset(4);
        ms.set_size(UINT64_MAX - 1);
        seed("memset_size_wraps", h_memset, ms);
    }
    {   // ggml#1103: copies larger than, without room in, or overlapping their destination
        CopyTensorRequest cp;
        f32(cp.mutable_src(), 1, 0, 256);
        f32(cp.mutable_dst(), 2, 0, 16);
        seed("copy_larger", h_copy, cp);
        cp.mutable_dst()->Clear();
        f32(cp.mutable_dst(), 2, 0, 0);
        seed("copy_zero_elements", h_copy, cp);
        cp.mutable_dst()->Clear();
        f32(cp.mutable_dst(), 1, 512, 256);
        seed("copy_overlap", h_copy, cp);
    }
    {   // invalid and removed types (block size 0)
        SetTensorRequest st;
        f32(st.mutable_tensor(), 1, 0, 16);
        st.mutable_tensor()->set_type(4);
        st.set_data(std::string(16, 'x'));
        seed("type_removed", h_set, st);
        st.mutable_tensor()->set_type(UINT32_MAX);
        seed("type_negative", h_set, st);
    }
    {   // GHSA-2phh-px2f-2qmx: a recompute by signature of a graph not held
        GraphComputeRequest r;
        r.set_signature("seed");
        seed("recompute", h_compute, r);
    }
    auto graph = [](GraphComputeRequest & r) {
        r.set_signature("attack");
        return r.mutable_graph();
    };
    {   // llama.cpp #25289: a function pointer in a custom op
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 0, 16);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 1024, 16);
        n->set_op(GGML_OP_MAP_CUSTOM1);
        const uint64_t params[3] = {0x401000, 1, 0};
        n->set_op_params(params, sizeof(params));
        n->add_src(1);
        g->add_nodes(2);
        seed("custom_op", h_compute, r);
    }
    {   // llama.cpp #25764: an ACC view past its result, and one that wraps in 64 bits
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 0, 16);
        f32(g->add_tensors(), 1, 256, 4);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 512, 16);
        n->set_op(GGML_OP_ACC);
        int32_t params[5] = {64, 64, 64, 52, 0};
        n->set_op_params(params, sizeof(params));
        n->add_src(1);
        n->add_src(2);
        g->add_nodes(3);
        seed("acc_outside", h_compute, r);
        params[0] = params[3] = INT32_MIN;
        n->set_op_params(params, sizeof(params));
        seed("acc_wraps", h_compute, r);
    }
    {   // llama.cpp #26825 / #26912: row indices outside the rows (buffer 1 holds 0x3c3c3c3c)
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 2, 0, 8, 4);
        TensorDesc * idx = g->add_tensors();
        f32(idx, 1, 0, 3);
        idx->set_type(GGML_TYPE_I32);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 2048, 8, 3);
        n->set_op(GGML_OP_GET_ROWS);
        n->add_src(1);
        n->add_src(2);
        g->add_nodes(3);
        seed("get_rows_index", h_compute, r);
    }
    {
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 2, 0, 8, 3);
        TensorDesc * idx = g->add_tensors();
        f32(idx, 1, 0, 3);
        idx->set_type(GGML_TYPE_I64);
        for (int i = 1; i < 4; ++i) {
            idx->set_nb(i, 24);
        }
        idx->set_nb(0, 8);
        f32(g->add_tensors(), 1, 2048, 8, 4);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 2048, 8, 4);
        n->set_op(GGML_OP_SET_ROWS);
        n->add_src(1);
        n->add_src(2);
        n->add_src(3);
        n->set_view_src(3);
        g->add_nodes(4);
        seed("set_rows_index", h_compute, r);
    }
    {   // graphs that lie: a node its own source, a cycle, more nodes than tensors
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 0, 8);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 256, 8);
        n->set_op(GGML_OP_SCALE);
        const float params[2] = {2.0f, 0.0f};
        n->set_op_params(params, sizeof(params));
        n->add_src(2);
        g->add_nodes(2);
        seed("graph_self_source", h_compute, r);
        g->mutable_tensors(0)->set_op(GGML_OP_SCALE);
        g->mutable_tensors(0)->set_op_params(params, sizeof(params));
        g->mutable_tensors(0)->add_src(2);
        n->set_src(0, 1);
        g->clear_nodes();
        g->add_nodes(1);
        g->add_nodes(2);
        seed("graph_cycle", h_compute, r);
        g->add_nodes(2);
        seed("graph_more_nodes", h_compute, r);
    }
    {   // a view outside its view source
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 64, 16);
        TensorDesc * v = g->add_tensors();
        f32(v, 1, 128, 16);
        v->set_op(GGML_OP_VIEW);
        v->add_src(1);
        v->set_view_src(1);
        v->set_view_offs(64);
        g->add_nodes(2);
        seed("view_outside_source", h_compute, r);
    }
    {   // 2D transfers: a last block past the tensor, strides that wrap around 2^64
        Transfer2d t;
        f32(t.mutable_tensor(), 2, 0, 64);
        t.set_block(16);
        t.set_count(2);
        t.set_stride(248);
        seed("blocks_past_tensor", h_blocks, t);
        t.set_offset(32);
        t.set_stride(UINT64_MAX - 15);
        seed("blocks_stride_wraps", h_blocks, t);
        t.set_offset(0);
        t.set_count(3);
        t.set_stride(uint64_t(1) << 63);
        seed("blocks_stride_overflows", h_blocks, t);
    }
    {   // init_tensor on a tensor reaching past its buffer
        InitTensorRequest it;
        f32(it.mutable_tensor(), 2, 240, 8);
        seed("init_past_buffer", h_init, it);
    }
    {   // a hash of the wrong length
        SetTensorHashRequest sh;
        f32(sh.mutable_tensor(), 1, 0, 16);
        sh.set_size(64);
        sh.set_sha256(std::string(16, '\1'));
        seed("hash_short", h_set_hash, sh);
    }
    {   // a lookup by a probe of the wrong length
        SetTensorHashRequest sh;
        f32(sh.mutable_tensor(), 1, 0, 16);
        sh.set_size(64);
        sh.set_probe(std::string(31, '\2'));
        seed("probe_short", h_set_hash, sh);
    }
}

void write_seeds(const std::string & dir) {
    DeviceRequest dr;
    write_seed(dir, "memory", h_memory, dr);
    AllocBufferRequest ab;
    ab.set_size(1024);
    write_seed(dir, "alloc", h_alloc, ab);
    BufferRequest fb;
    fb.set_buffer(2);
    write_seed(dir, "free", h_free, fb);
    ClearBufferRequest cb;
    cb.set_buffer(1);
    cb.set_value(7);
    write_seed(dir, "clear", h_clear, cb);
    SetTensorRequest st;
    f32(st.mutable_tensor(), 1, 64, 8);
    st.set_offset(4);
    st.set_data(std::string(16, '\1'));
    write_seed(dir, "set", h_set, st);
    SetTensorHashRequest sh;
    f32(sh.mutable_tensor(), 1, 0, 16);
    sh.set_size(64);
    sh.set_sha256(std::string(32, '\0'));
    sh.set_store(true);
    write_seed(dir, "set_hash", h_set_hash, sh);
    SetTensorHashRequest sp;
    f32(sp.mutable_tensor(), 1, 0, 16);
    sp.set_size(64);
    sp.set_probe(std::string(32, '\3'));
    write_seed(dir, "set_hash_probe", h_set_hash, sp);
    GetTensorRequest gt;
    f32(gt.mutable_tensor(), 2, 0, 16);
    gt.set_size(64);
    write_seed(dir, "get", h_get, gt);
    MemsetTensorRequest ms;
    f32(ms.mutable_tensor(), 1, 128, 4);
    ms.set_size(16);
    ms.set_value(1);
    write_seed(dir, "memset", h_memset, ms);
    CopyTensorRequest cp;
    f32(cp.mutable_src(), 2, 0, 16);
    f32(cp.mutable_dst(), 1, 256, 16);
    write_seed(dir, "copy", h_copy, cp);
    Transfer2d t2;
    f32(t2.mutable_tensor(), 1, 0, 64, 4);
    t2.set_offset(8);
    t2.set_block(32);
    t2.set_count(4);
    t2.set_stride(256);
    write_seed(dir, "blocks", h_blocks, t2);
    InitTensorRequest it;
    f32(it.mutable_tensor(), 1, 512, 16);
    write_seed(dir, "init", h_init, it);

    // Graphs: add with broadcast, matrix product, softmax, get_rows, a view.
    auto graph = [](GraphComputeRequest & r) {
        r.set_signature("seed");
        return r.mutable_graph();
    };
    {
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 0, 16, 4);
        f32(g->add_tensors(), 2, 0, 16);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 1024, 16, 4);
        n->set_op(GGML_OP_ADD);
        n->add_src(1);
        n->add_src(2);
        g->add_nodes(3);
        write_seed(dir, "graph_add", h_compute, r);
        write_seed(dir, "supports_add", h_supports, *g);
    }
    {
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 0, 8, 4);
        f32(g->add_tensors(), 2, 0, 8, 2);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 2048, 4, 2);
        n->set_op(GGML_OP_MUL_MAT);
        n->add_src(1);
        n->add_src(2);
        TensorDesc * m = g->add_tensors();
        f32(m, 1, 3072, 4, 2);
        m->set_op(GGML_OP_SOFT_MAX);
        float params[2] = {1.0f, 0.0f};
        m->set_op_params(params, sizeof(params));
        m->add_src(3);
        g->add_nodes(3);
        g->add_nodes(4);
        write_seed(dir, "graph_mul_mat_softmax", h_compute, r);
    }
    {
        GraphComputeRequest r;
        GraphMessage *      g = graph(r);
        f32(g->add_tensors(), 1, 0, 8, 4);
        TensorDesc * idx = g->add_tensors();
        f32(idx, 2, 0, 3);
        idx->set_type(GGML_TYPE_I32);
        TensorDesc * n = g->add_tensors();
        f32(n, 1, 2048, 8, 3);
        n->set_op(GGML_OP_GET_ROWS);
        n->add_src(1);
        n->add_src(2);
        TensorDesc * v = g->add_tensors();
        f32(v, 1, 2048, 24);
        v->set_op(GGML_OP_RESHAPE);
        v->add_src(3);
        v->set_view_src(3);
        g->add_nodes(3);
        g->add_nodes(4);
        write_seed(dir, "graph_get_rows_view", h_compute, r);
    }
    write_attack_seeds(dir);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    ggml_log_set(quiet, nullptr);
    g_verbose = std::getenv("LOOM_FUZZ_RPC_VERBOSE") != nullptr;
    if (const char * dir = std::getenv("LOOM_FUZZ_RPC_WRITE_SEEDS")) {
        write_seeds(dir);
        std::exit(0);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) {
        return 0;
    }
    run(data[0], data + 1, size - 1);
    return 0;
}
