// Checks of untrusted RPC messages (Note [RPC trust boundary] in validate.h).

#include "validate.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "core/fits.h"
#include "core/indices.h"
#include "core/types.h"
#include "ggml-cpu.h"
#include "protocol.h"

namespace loom::rpc {

namespace {

using u128 = unsigned __int128;

bool fail_with(std::string * why, std::string msg) {
    *why = std::move(msg);
    return false;
}

std::string shape_text(const ggml_tensor * t) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", ggml_type_name(t->type),
                  t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    return buf;
}

bool checked_add(uint64_t a, uint64_t b, uint64_t * out) {
    return !__builtin_add_overflow(a, b, out);
}

} // namespace

bool tensor_extent(ggml_type type, const int64_t ne[4], const uint64_t nb[4], uint64_t * extent, std::string * why) {
    if (!type_is_valid(int(type))) {
        return fail_with(why, "unknown tensor type " + std::to_string(int(type)));
    }
    const u128 ts   = ggml_type_size(type);
    const int64_t blck = ggml_blck_size(type);
    u128 elements = 1;
    for (int i = 0; i < 4; ++i) {
        if (ne[i] < 0 || ne[i] > k_max_ne) {
            return fail_with(why, "ne[" + std::to_string(i) + "] = " + std::to_string(ne[i]) + " out of range");
        }
        if (nb[i] > k_max_stride) {
            return fail_with(why, "nb[" + std::to_string(i) + "] = " + std::to_string(nb[i]) + " out of range");
        }
        elements *= u128(ne[i]);
        if (elements > k_max_elements) {
            return fail_with(why, "too many elements");
        }
    }
    if (ne[0] % blck != 0) {
        return fail_with(why, "ne[0] is not a whole number of blocks of " + std::string(ggml_type_name(type)));
    }
    if (blck > 1 && nb[0] != ts) {
        return fail_with(why, "blocks of a quantized type must be contiguous (nb[0] = type size)");
    }
    if (elements == 0) {
        *extent = 0;
        return true;
    }
    // Strided access reaches the last element of the last row; contiguous
    // access (rows, or the whole tensor) reaches as many bytes as the
    // elements fill. The extent is the larger of both.
    u128 row = blck == 1 ? std::max(u128(ne[0] - 1) * nb[0] + ts, u128(ne[0]) * ts) : u128(ne[0] / blck) * ts;
    for (int i = 1; i < 4; ++i) {
        row += u128(ne[i] - 1) * nb[i];
    }
    const u128 compact = elements / u128(blck) * ts;
    const u128 e       = std::max(row, compact);
    if (e > (u128(1) << 62)) {
        return fail_with(why, "tensor too large");
    }
    *extent = uint64_t(e);
    return true;
}

bool decode_tensor(const TensorDesc & d, const BufferLookup & buffers, ggml_tensor * t, std::string * why) {
    if (d.ne_size() != 4 || d.nb_size() != 4) {
        return fail_with(why, "a tensor needs 4 ne and 4 nb");
    }
    if (d.type() >= GGML_TYPE_COUNT) {
        return fail_with(why, "unknown tensor type " + std::to_string(d.type()));
    }
    int64_t  ne[4];
    uint64_t nb[4];
    for (int i = 0; i < 4; ++i) {
        ne[i] = d.ne(i);
        nb[i] = d.nb(i);
    }
    uint64_t extent = 0;
    if (!tensor_extent(ggml_type(d.type()), ne, nb, &extent, why)) {
        return false;
    }
    // Kernels load elements (and the fields of quantized blocks) as their
    // C types: offsets and strides keep them aligned. The largest power of
    // two dividing the element or block size, at most 8, is that alignment.
    const uint64_t ts    = ggml_type_size(ggml_type(d.type()));
    const uint64_t align = std::min<uint64_t>(ts & (~ts + 1), 8);
    for (int i = 0; i < 4; ++i) {
        if (nb[i] % align != 0) {
            return fail_with(why, "nb[" + std::to_string(i) + "] = " + std::to_string(nb[i]) +
                                      " is not a multiple of the type's alignment " + std::to_string(align));
        }
    }
    if (d.offset() % align != 0) {
        return fail_with(why, "offset " + std::to_string(d.offset()) + " is not a multiple of the type's alignment " +
                                  std::to_string(align));
    }
    if (!buffers) {
        // Not placed in memory (a question about support): shape only.
        t->type = ggml_type(d.type());
        for (int i = 0; i < 4; ++i) {
            t->ne[i] = ne[i];
            t->nb[i] = size_t(nb[i]);
        }
        return true;
    }
    ggml_backend_buffer_t buf = d.buffer() != 0 ? buffers(d.buffer()) : nullptr;
    if (buf == nullptr) {
        return fail_with(why, "tensor in unknown buffer " + std::to_string(d.buffer()));
    }
    const uint64_t size = buf->size;
    if (d.offset() > size || extent > size - d.offset()) {
        return fail_with(why, "tensor of " + std::to_string(extent) + " bytes at offset " + std::to_string(d.offset()) +
                                  " does not fit its buffer of " + std::to_string(size) + " bytes");
    }
    auto * base = static_cast<uint8_t *>(buf->base());
    if (base == nullptr && extent > 0) {
        return fail_with(why, "tensor in a buffer without memory");
    }
    t->type   = ggml_type(d.type());
    t->buffer = buf;
    t->data   = base != nullptr ? base + d.offset() : nullptr;
    for (int i = 0; i < 4; ++i) {
        t->ne[i] = ne[i];
        t->nb[i] = size_t(nb[i]);
    }
    return true;
}

bool check_range(const ggml_tensor * t, uint64_t offset, uint64_t size, std::string * why) {
    const uint64_t n = ggml_nbytes(t);
    if (offset > n || size > n - offset) {
        return fail_with(why, "range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                                  ") is outside the tensor's " + std::to_string(n) + " bytes");
    }
    return true;
}

bool check_blocks(const ggml_tensor * t, uint64_t offset, uint64_t block, uint64_t count, uint64_t stride,
                  uint64_t * total, std::string * why) {
    const std::string what = std::to_string(count) + " blocks of " + std::to_string(block) + " bytes from offset " +
                             std::to_string(offset) + ", stride " + std::to_string(stride);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, block, &bytes)) {
        return fail_with(why, what + ": more than 2^64 bytes in all");
    }
    *total = bytes;
    if (bytes == 0) {
        return check_range(t, offset, 0, why);
    }
    // Blocks start at increasing positions: the last one ends highest.
    uint64_t span = 0, last = 0;
    if (__builtin_mul_overflow(count - 1, stride, &span) || __builtin_add_overflow(offset, span, &last)) {
        return fail_with(why, what + ": the last block lies past 2^64");
    }
    const uint64_t n = ggml_nbytes(t);
    if (last > n || block > n - last) {
        return fail_with(why, what + ": the last block [" + std::to_string(last) + ", +" + std::to_string(block) +
                                  ") is outside the tensor's " + std::to_string(n) + " bytes");
    }
    return true;
}

// Whether the strides give each element bytes apart from the others': in
// the order of their strides, each dimension steps past the whole of the
// ones before it.
bool elements_apart(const ggml_tensor * t) {
    int order[4] = {0, 1, 2, 3};
    std::sort(order, order + 4, [t](int a, int b) { return t->nb[a] < t->nb[b]; });
    uint64_t span = ggml_type_size(t->type) * uint64_t(t->ne[order[0]]) / uint64_t(ggml_blck_size(t->type));
    if (t->nb[order[0]] != ggml_type_size(t->type) && t->ne[order[0]] > 1) {
        return false;
    }
    for (int k = 1; k < 4; ++k) {
        const int d = order[k];
        if (t->ne[d] > 1 && t->nb[d] < span) {
            return false;
        }
        span = std::max<uint64_t>(span, t->ne[d] > 1 ? t->nb[d] * uint64_t(t->ne[d]) : span);
    }
    return true;
}

bool check_node(const ggml_tensor * node, std::string * why) {
    const OpInfo * info = op_info(node->op);
    if (info == nullptr) {
        return fail_with(why, "node without a valid op");
    }
    if (node->op == GGML_OP_NONE) {
        // Computes nothing: every device skips it, as in ggml (graphs hold
        // such nodes, inputs flagged as parameters for one).
        return true;
    }
    if (info->kind == OpKind::view) {
        // No computation: the view's own memory was checked against its buffer.
        return node->src[0] != nullptr ? true : fail_with(why, "a view needs its source");
    }
    if (info->kind == OpKind::custom) {
        // Its op params name a function of the sender's process (Note
        // [Custom ops] in core/custom.h).
        return fail_with(why, std::string(info->name) +
                                  ": op not accepted by the RPC server (its op params name a function of the sender)");
    }
    // The operator's rule: sources, shapes, types and op params (Note
    // [Shape rules] in core/fits.h).
    if (!node_fits(node, why)) {
        return false;
    }
    // Kernels write results contiguously, except into the destinations of
    // copies, and in the layouts some constructors give their results: rope
    // in place on a strided view (its source's strides), the depthwise
    // convolution on channels-first data (ggml_conv_2d_dw_direct). Those
    // strides must give every element bytes of its own, so the result lies
    // within its extent whichever way a kernel walks it.
    const bool own_layout = ((node->op == GGML_OP_ROPE || node->op == GGML_OP_ROPE_BACK) &&
                             std::equal(node->nb, node->nb + 4, node->src[0]->nb)) ||
                            node->op == GGML_OP_CONV_2D_DW;
    if (own_layout && !ggml_is_contiguous(node) && !elements_apart(node)) {
        return fail_with(why, std::string(ggml_op_desc(node)) + ": the result's elements overlap");
    }
    if (node->op != GGML_OP_CPY && node->op != GGML_OP_SET_ROWS && !own_layout && !ggml_is_contiguous(node)) {
        return fail_with(why, std::string(ggml_op_desc(node)) + ": the result must be contiguous");
    }
    return true;
}

std::unique_ptr<RebuiltGraph> rebuild_graph(const GraphMessage & msg, const BufferLookup & buffers,
                                            ggml_backend_dev_t dev, std::string * why) {
    const size_t n = size_t(msg.tensors_size());
    if (n == 0 || n > k_max_graph_tensors || size_t(msg.nodes_size()) > n || msg.nodes_size() == 0) {
        *why = "a graph needs 1 to " + std::to_string(k_max_graph_tensors) + " tensors and nodes among them";
        return nullptr;
    }
    auto g = std::make_unique<RebuiltGraph>();
    ggml_init_params params{};
    params.mem_size   = n * ggml_tensor_overhead() + ggml_graph_overhead_custom(size_t(msg.nodes_size()), false) + 1024;
    params.no_alloc   = true;
    g->ctx.reset(ggml_init(params));
    if (!g->ctx) {
        *why = "out of memory";
        return nullptr;
    }
    struct Placed {
        ggml_backend_buffer_t buffer;
        uint64_t              offset;
        uint64_t              extent;
    };
    std::vector<ggml_tensor *> tensors(n);
    std::vector<Placed>        placed(n);
    for (size_t i = 0; i < n; ++i) {
        const TensorDesc & d = msg.tensors(int(i));
        ggml_tensor        tmp{};
        if (!decode_tensor(d, buffers, &tmp, why)) {
            *why = "tensor " + std::to_string(i + 1) + ": " + *why;
            return nullptr;
        }
        if (d.op() >= GGML_OP_COUNT || d.op_params().size() > GGML_MAX_OP_PARAMS || d.src_size() > GGML_MAX_SRC ||
            d.name().size() >= k_max_name_bytes) {
            *why = "tensor " + std::to_string(i + 1) + ": invalid op, op params, sources or name";
            return nullptr;
        }
        ggml_tensor * t = ggml_new_tensor(g->ctx.get(), tmp.type, 4, tmp.ne);
        std::memcpy(t->nb, tmp.nb, sizeof(t->nb));
        t->buffer = tmp.buffer;
        t->data   = tmp.data;
        t->op     = ggml_op(d.op());
        std::memcpy(t->op_params, d.op_params().data(), d.op_params().size());
        t->flags = d.flags() & (GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_PARAM |
                                GGML_TENSOR_FLAG_LOSS | GGML_TENSOR_FLAG_COMPUTE);
        ggml_set_name(t, d.name().c_str());
        uint64_t extent = 0;
        std::string unused;
        tensor_extent(t->type, t->ne, reinterpret_cast<const uint64_t *>(t->nb), &extent, &unused);
        tensors[i] = t;
        placed[i]  = {tmp.buffer, d.offset(), extent};
        if (std::find(g->buffers.begin(), g->buffers.end(), tmp.buffer) == g->buffers.end()) {
            g->buffers.push_back(tmp.buffer);
        }
    }
    // References, now that every tensor exists.
    for (size_t i = 0; i < n; ++i) {
        const TensorDesc & d = msg.tensors(int(i));
        for (int s = 0; s < d.src_size(); ++s) {
            const uint32_t ref = d.src(s);
            // A node may name itself (ggml_cast's copy has itself as destination).
            if (ref > n) {
                *why = "tensor " + std::to_string(i + 1) + ": source " + std::to_string(s) + " refers to " +
                       std::to_string(ref) + ", not another tensor of the message";
                return nullptr;
            }
            tensors[i]->src[s] = ref != 0 ? tensors[ref - 1] : nullptr;
        }
        if (const uint32_t v = d.view_src(); v != 0) {
            uint64_t at = 0;
            if (v > n || v == i + 1 || placed[v - 1].buffer != placed[i].buffer ||
                !checked_add(placed[v - 1].offset, d.view_offs(), &at) || at != placed[i].offset) {
                *why = "tensor " + std::to_string(i + 1) + ": its view source is not a tensor of the message at its "
                       "place in the same buffer";
                return nullptr;
            }
            // As ggml_view requires, the view's bytes lie inside its source's.
            const uint64_t bytes = ggml_nbytes(tensors[i]);
            const uint64_t whole = ggml_nbytes(tensors[v - 1]);
            if (bytes > 0 && (d.view_offs() > whole || bytes > whole - d.view_offs())) {
                *why = "tensor " + std::to_string(i + 1) + ": a view of " + std::to_string(bytes) + " bytes at offset " +
                       std::to_string(d.view_offs()) + " lies outside its view source of " + std::to_string(whole) +
                       " bytes";
                return nullptr;
            }
            tensors[i]->view_src  = tensors[v - 1];
            tensors[i]->view_offs = size_t(d.view_offs());
        }
    }
    g->graph = ggml_new_graph_custom(g->ctx.get(), size_t(msg.nodes_size()), false);
    // The tensors the graph writes: its nodes, and what the optimizer steps
    // update in place besides (the parameter, AdamW's moments).
    std::vector<size_t> written;
    std::vector<size_t> check_owner; // the node of each index check
    written.reserve(size_t(msg.nodes_size()));
    auto index_of = [&](const ggml_tensor * t) {
        return size_t(std::find(tensors.begin(), tensors.end(), t) - tensors.begin());
    };
    // Nodes run in the order listed, which must be ggml's: a source that is
    // a node comes before the nodes it feeds, so no node reads one not yet
    // computed and the sources form no cycle. The one node that names
    // itself is ggml_cast's copy, as its destination (src[1]).
    enum : uint8_t { k_leaf, k_pending, k_done };
    std::vector<uint8_t> state(n, k_leaf);
    for (int k = 0; k < msg.nodes_size(); ++k) {
        if (msg.nodes(k) != 0 && msg.nodes(k) <= n) {
            state[msg.nodes(k) - 1] = k_pending;
        }
    }
    for (int k = 0; k < msg.nodes_size(); ++k) {
        const uint32_t ref = msg.nodes(k);
        if (ref == 0 || ref > n) {
            *why = "node " + std::to_string(k) + " refers to " + std::to_string(ref) + ", not a tensor of the message";
            return nullptr;
        }
        ggml_tensor *      node = tensors[ref - 1];
        const TensorDesc & nd   = msg.tensors(int(ref - 1));
        for (int s = 0; s < nd.src_size(); ++s) {
            const uint32_t src = nd.src(s);
            const bool     own = src == ref;
            if (src != 0 && (own ? !(node->op == GGML_OP_CPY && s == 1) : state[src - 1] == k_pending)) {
                *why = "node " + std::to_string(k) + ": its source " + std::to_string(s) +
                       " is not computed before it (" + (own ? "the node itself" : "a later node") + ")";
                return nullptr;
            }
        }
        state[ref - 1] = k_done;
        if (node->op == GGML_OP_NONE && (node->flags & GGML_TENSOR_FLAG_PARAM) != 0) {
            continue; // a parameter is a node of its graph (ggml_set_param) that computes nothing
        }
        if (!check_node(node, why)) {
            *why = "node " + std::to_string(k) + ": " + *why;
            return nullptr;
        }
        if (dev != nullptr && !is_view_op(node->op) && !ggml_backend_dev_supports_op(dev, node)) {
            *why = "node " + std::to_string(k) + ": " + ggml_op_desc(node) + " (" + shape_text(node) +
                   ") is not supported by device " + ggml_backend_dev_name(dev);
            return nullptr;
        }
        ggml_graph_add_node(g->graph, node);
        if (!is_view_op(node->op)) {
            written.push_back(ref - 1);
        }
        if (node->op == GGML_OP_OPT_STEP_SGD || node->op == GGML_OP_OPT_STEP_ADAMW) {
            written.push_back(index_of(node->src[0]));
        }
        if (node->op == GGML_OP_OPT_STEP_ADAMW) {
            written.push_back(index_of(node->src[2]));
            written.push_back(index_of(node->src[3]));
        }
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if ((index_srcs(node->op) & (1u << s)) != 0 && node->src[s] != nullptr) {
                g->index_checks.push_back({node, s});
                check_owner.push_back(ref - 1);
            }
        }
    }
    // Note [Computed indices]
    // Indices are checked before the computation, so a node that writes them
    // (a mixture of experts' router picks experts and rows with
    // argsort_top_k) would make the check worthless: such graphs are
    // refused, except on loom's CPU device, which checks every index of a
    // node before any thread writes and fails the computation on a bad one
    // (backends/cpu/compute.cpp, Note [Index sources] in core/op_table.h).
    // There the indices are left to the device, unless the node writes them
    // itself: its threads would then read indices another thread is
    // overwriting.
    const bool kernel_checks = dev != nullptr && ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU &&
                               ggml_backend_dev_backend_reg(dev) == ggml_backend_cpu_reg();
    for (size_t ci = 0; ci < g->index_checks.size(); ++ci) {
        IndexCheck & c = g->index_checks[ci];
        if (!buffers) {
            break;
        }
        const Placed & p = placed[index_of(c.node->src[c.src])];
        for (size_t wi : written) {
            const Placed & q = placed[wi];
            if (q.buffer != p.buffer || q.extent == 0 || p.extent == 0) {
                continue;
            }
            if (q.offset < p.offset + p.extent && p.offset < q.offset + q.extent) {
                if (kernel_checks && wi != check_owner[ci]) {
                    c.at_compute = true;
                    continue;
                }
                *why = "the graph writes the indices of " + std::string(ggml_op_desc(c.node)) + " (src[" +
                       std::to_string(c.src) + "])";
                return nullptr;
            }
        }
    }
    return g;
}

bool check_indices(const RebuiltGraph & g, std::string * why) {
    std::vector<uint8_t> bytes;
    for (const IndexCheck & c : g.index_checks) {
        if (c.at_compute) {
            continue;
        }
        const ggml_tensor * t = c.node->src[c.src];
        bytes.resize(ggml_nbytes(t));
        if (!bytes.empty()) {
            t->buffer->get_tensor(t, bytes.data(), 0, bytes.size());
        }
        BadIndex bad;
        if (find_bad_index(t, bytes.data(), index_limit(c.node), &bad)) {
            bad.src = c.src;
            return fail_with(why, bad_index_text(c.node, bad));
        }
    }
    return true;
}

} // namespace loom::rpc
