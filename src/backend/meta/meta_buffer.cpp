// Meta buffers: one buffer per member, each of the meta buffer's size; a
// tensor at offset o of the meta buffer has its member slices at offset o of
// the members' buffers. Slices are ggml_tensor objects owned by the meta
// buffer, made when the tensor is placed (init_tensor).

#include <cinttypes>
#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/common.h"
#include "meta.h"

namespace loom::meta {

namespace {

// A meta tensor's data is an offset from this address, never dereferenced.
char * const k_base = reinterpret_cast<char *>(uintptr_t{1} << 44);

void contiguous_strides(ggml_tensor * t) {
    t->nb[0] = ggml_type_size(t->type);
    t->nb[1] = ggml_row_size(t->type, t->ne[0]);
    for (int k = 2; k < GGML_MAX_DIMS; ++k) {
        t->nb[k] = t->nb[k - 1] * size_t(t->ne[k - 1]);
    }
}

bool check_user_state(const ggml_tensor * t, const SplitState & s, size_t n, std::string & reason) {
    if (s.axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED || s.axis == GGML_BACKEND_SPLIT_AXIS_PARTIAL) {
        return true;
    }
    if (!is_split_axis(s.axis)) {
        reason = std::string("the split-state callback answered axis ") +
                 ggml_backend_meta_split_axis_name(s.axis);
        return false;
    }
    if (s.n_segments < 1 || s.n_segments > 16) {
        reason = "the split state has " + std::to_string(s.n_segments) + " segments (1 to 16 allowed)";
        return false;
    }
    const int64_t blck  = s.axis == GGML_BACKEND_SPLIT_AXIS_0 ? ggml_blck_size(t->type) : 1;
    int64_t       total = 0;
    for (uint32_t seg = 0; seg < s.n_segments; ++seg) {
        if (s.nr[seg] < 1) {
            reason = "a segment repeats 0 times";
            return false;
        }
        for (size_t j = 0; j < n; ++j) {
            const int64_t ne = s.ne[seg * n + j];
            if (ne < 0 || ne % blck != 0) {
                reason = "a piece of " + std::to_string(ne) + " elements (block size " + std::to_string(blck) + ")";
                return false;
            }
            total += ne * s.nr[seg];
        }
    }
    if (total != t->ne[s.axis]) {
        reason = "the pieces add up to " + std::to_string(total) + " elements, the tensor has " +
                 std::to_string(t->ne[s.axis]) + " along axis " + std::to_string(int(s.axis));
        return false;
    }
    return true;
}

// Where a strided view of a contiguous, split root tensor lies on each member.
struct ViewPlacement {
    SplitState           state;
    std::vector<int64_t> ne_split; // per member: the view's extent along its split dimension
    std::vector<size_t>  offs;     // per member: the view's offset in the member's root slice
    int                  dim = -1; // the view's split dimension
    int                  map[GGML_MAX_DIMS]; // root dimension of each view dimension (-1: extent 1)
    int64_t              mul[GGML_MAX_DIMS]; // the view's stride in strides of that root dimension
};

// Places t, a view whose geometry is read against src (t's root, or the
// tensor a view operation reads) with slices ss; src lies at src_offs in the root.
bool place_view(const ggml_tensor * t, const ggml_tensor * src, const Slices & ss, size_t n, ViewPlacement & vp,
                std::string & reason) {
    // A view of a computed partial sum sees the sum (it is reduced in place).
    const SplitState   st       = state_as_source(src);
    const int          a        = st.axis;
    const size_t       src_offs = src->view_src != nullptr ? src->view_offs : 0;
    vp.state                    = st;
    vp.ne_split.assign(n, 0);
    vp.offs.assign(n, t->view_offs);
    if (!is_split_axis(a)) {
        return true;
    }
    if (t->view_offs < src_offs) {
        reason = "a view before its source";
        return false;
    }
    const size_t rel        = t->view_offs - src_offs;
    const bool   same_count = ggml_nelements(t) == ggml_nelements(src);
    if (ggml_is_contiguous(t) && ggml_is_contiguous(src) && rel == 0 && same_count) {
        // A reshape: the split axis lands where the products of the extents agree.
        SplitState r = reshape_state(st, src->ne, t->ne, n, reason);
        if (r.axis == GGML_BACKEND_SPLIT_AXIS_UNKNOWN) return false;
        vp.state = r;
        vp.dim   = -2; // contiguous: strides follow from the extents
        for (size_t j = 0; j < n; ++j) {
            vp.ne_split[j] = share(r, n, j);
            vp.offs[j]     = ss.parts[j]->view_src != nullptr ? ss.parts[j]->view_offs : 0;
        }
        return true;
    }
    // A strided view: each view dimension walks one source dimension, or
    // the split axis in heads, or the split axis's heads whole (Note [Views
    // by heads]). One step of the view's split dimension is per_step
    // elements of the source's split axis (sub-steps of one: heads).
    int     dim      = -1;
    int64_t per_step = 1; // source elements per view element along the split axis (heads)
    int64_t per_elem = 1; // view elements per source element along it (whole heads merged)
    for (int k = 0; k < GGML_MAX_DIMS; ++k) {
        vp.map[k] = -1;
        vp.mul[k] = 1;
        if (t->ne[k] == 1) continue;
        for (int m = 0; m < GGML_MAX_DIMS; ++m) {
            if ((src->ne[m] > 1 || m == a) && src->nb[m] == t->nb[k]) {
                vp.map[k] = m;
                break;
            }
        }
        // Note [Views by heads]
        // A fused QKV product's rows, split by heads, are viewed as [head
        // dim, heads, tokens]: dimension k - 1 walks the split axis element
        // by element and dimension k, whose stride is a head's, walks it by
        // heads; dimension k is then the view's split dimension, its pieces
        // the source's in whole heads. The other way, a view [head dim *
        // heads, tokens] of such a view merges the heads into its dimension
        // k, which walks the source's lower dimensions up to the split axis
        // (contiguous), whole heads only: its pieces are the heads' times
        // the head's elements.
        if (vp.map[k] < 0 && k > 0 && dim == k - 1 && vp.mul[k - 1] == 1 && per_elem == 1 &&
            t->nb[k] == t->nb[k - 1] * size_t(t->ne[k - 1])) {
            vp.map[k] = a;
            vp.mul[k] = t->ne[k - 1];
            per_step  = t->ne[k - 1];
        }
        if (vp.map[k] < 0) {
            reason = "a view whose strides are not those of its source";
            return false;
        }
        const int m = vp.map[k];
        if (m < a && t->ne[k] > src->ne[m]) {
            int64_t unit = 1;
            for (int i = m; i < a; ++i) {
                if (src->nb[i + 1] != src->nb[i] * size_t(src->ne[i])) {
                    reason = "a view merges dimensions of its split source that are not contiguous";
                    return false;
                }
                unit *= src->ne[i];
            }
            if (dim >= 0 || t->ne[k] % unit != 0 || t->ne[k] / unit > src->ne[a]) {
                reason = "a view merges part of a head of its split source";
                return false;
            }
            dim      = k;
            per_elem = unit;
            continue;
        }
        if (m == a) {
            dim = k;
        }
    }
    // The source position of the view's first element, largest strides first.
    int order[GGML_MAX_DIMS] = {0, 1, 2, 3};
    std::sort(order, order + GGML_MAX_DIMS, [&](int x, int y) { return src->nb[x] > src->nb[y]; });
    size_t  rest = rel;
    int64_t idx[GGML_MAX_DIMS];
    for (int m : order) {
        idx[m] = std::min<int64_t>(int64_t(rest / src->nb[m]), src->ne[m] - 1);
        rest -= size_t(idx[m]) * src->nb[m];
    }
    if (rest != 0) {
        reason = "a view offset inside an element";
        return false;
    }
    if (per_elem > 1) {
        // The merged lower dimensions start at a head.
        for (int m = 0; m < a; ++m) {
            if (idx[m] != 0 && src->nb[m] < src->nb[a]) {
                reason = "a view merges heads from inside a head";
                return false;
            }
        }
    }
    const int64_t lo = idx[a], hi = lo + (dim >= 0 ? t->ne[dim] * per_step / per_elem : 1);
    // The pieces of [lo, hi) along the split axis, which must be whole pieces.
    SplitState s{};
    s.axis = dim >= 0 ? ggml_backend_meta_split_axis(dim) : GGML_BACKEND_SPLIT_AXIS_UNKNOWN;
    std::vector<int64_t> before(n, 0);
    int64_t              pos     = 0;
    bool                 started = false;
    for (uint32_t seg = 0; seg < st.n_segments; ++seg) {
        for (uint32_t r = 0; r < st.nr[seg]; ++r) {
            int64_t width = 0;
            for (size_t j = 0; j < n; ++j) width += st.ne[seg * n + j];
            const bool inside = pos >= lo && pos + width <= hi;
            if (!inside && pos < hi && pos + width > lo) {
                reason = "a view cuts a segment of its split source";
                return false;
            }
            if (inside) {
                if (s.n_segments == 16) {
                    reason = "a view of more than 16 pieces";
                    return false;
                }
                for (size_t j = 0; j < n; ++j) {
                    if (st.ne[seg * n + j] % per_step != 0) {
                        reason = "a view by heads cuts a head of its split source";
                        return false;
                    }
                    s.ne[s.n_segments * n + j] = st.ne[seg * n + j] / per_step * per_elem;
                }
                s.nr[s.n_segments++] = 1;
                started              = true;
            } else if (!started) {
                for (size_t j = 0; j < n; ++j) before[j] += st.ne[seg * n + j];
            }
            pos += width;
        }
    }
    if (dim < 0 || s.n_segments == 0) {
        reason = "a view that takes part of one piece of its split source";
        return false;
    }
    vp.state = s;
    vp.dim   = dim;
    for (size_t j = 0; j < n; ++j) {
        const ggml_tensor * sp  = ss.parts[j].get();
        size_t              off = sp->view_src != nullptr ? sp->view_offs : 0;
        for (int m = 0; m < GGML_MAX_DIMS; ++m) {
            off += size_t(m == a ? before[j] : idx[m]) * sp->nb[m];
        }
        vp.offs[j]     = off;
        vp.ne_split[j] = share(s, n, j);
    }
    return true;
}

} // namespace

bool is_meta_buffer(const ggml_backend_buffer * b) {
    return b != nullptr && dynamic_cast<const Buffer *>(b) != nullptr;
}

const Slices * slices_of(const ggml_tensor * t) {
    if (t == nullptr || !is_meta_buffer(t->buffer)) return nullptr;
    return static_cast<Buffer *>(t->buffer)->find(t);
}

SplitState state_as_source(const ggml_tensor * t) {
    const Slices * s = slices_of(t);
    LOOM_ASSERT(s != nullptr);
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    if (s->state.axis == GGML_BACKEND_SPLIT_AXIS_PARTIAL && base->op != GGML_OP_NONE) {
        return mirrored_state();
    }
    return s->state;
}

Buffer::Buffer(BufferType * type, size_t size, std::vector<ggml_backend_buffer *> members)
    : ggml_backend_buffer(type, size), members_(std::move(members)) {}

Buffer::~Buffer() {
    for (ggml_backend_buffer * b : members_) {
        ggml_backend_buffer_free(b);
    }
}

void * Buffer::base() {
    return k_base;
}

Device * Buffer::meta_device() const {
    return static_cast<Device *>(buft->device);
}

bool Slices::matches(const ggml_tensor * t) const {
    return data == t->data && type == t->type && std::equal(ne, ne + GGML_MAX_DIMS, t->ne) &&
           std::equal(nb, nb + GGML_MAX_DIMS, t->nb) && view_src == t->view_src && view_offs == t->view_offs &&
           op == t->op;
}

const Slices * Buffer::peek(const ggml_tensor * t) const {
    auto it = tensors_.find(t);
    return it != tensors_.end() && it->second.matches(t) ? &it->second : nullptr;
}

const Slices * Buffer::find(const ggml_tensor * t) {
    auto it = tensors_.find(t);
    if (it != tensors_.end() && it->second.matches(t)) {
        // A computed tensor whose sources were placed anew is placed anew.
        bool current = true;
        for (int i = 0; i < GGML_MAX_SRC && current; ++i) {
            const ggml_tensor * s = t->src[i];
            if (s == nullptr || s == t || !is_meta_buffer(s->buffer)) continue;
            // The source's own entry, not checked further: a stale source is
            // re-placed (a new serial) when it is looked up itself.
            const Slices * ss = static_cast<Buffer *>(s->buffer)->peek(s);
            if (ss == nullptr) ss = slices_of(s);
            current = ss != nullptr && ss->serial == it->second.src_serials[i];
        }
        if (current) return &it->second;
        if (init_tensor(const_cast<ggml_tensor *>(t)) != GGML_STATUS_SUCCESS) return nullptr;
        it = tensors_.find(t);
        return it == tensors_.end() ? nullptr : &it->second;
    }
    if (t->view_src != nullptr && t->buffer == this) {
        if (init_tensor(const_cast<ggml_tensor *>(t)) != GGML_STATUS_SUCCESS) return nullptr;
        it = tensors_.find(t);
        return it == tensors_.end() ? nullptr : &it->second;
    }
    // A tensor given the memory of one that was placed (the scheduler's
    // clones of the user's tensors) reads and writes that tensor's slices.
    for (const auto & [key, sl] : tensors_) {
        (void) key;
        if (sl.matches(t)) return &sl;
    }
    return nullptr;
}

ggml_status Buffer::init_tensor(ggml_tensor * t) {
    const size_t n   = members_.size();
    Device *     dev = meta_device();
    tensors_.erase(t);
    Slices      sl;
    std::string reason;
    const ggml_tensor * root = t->view_src;
    ViewPlacement       vp;
    if (root != nullptr) {
        const ggml_tensor * geo = is_view_op(t->op) && t->src[0] != nullptr ? t->src[0] : root;
        const Slices *      rs  = slices_of(geo);
        if (rs == nullptr || find(root) == nullptr) {
            LOOM_LOG_ERROR("meta buffer: the source of view %s is not placed\n", describe(t).text);
            return GGML_STATUS_FAILED;
        }
        if (!place_view(t, geo, *rs, n, vp, reason)) {
            LOOM_LOG_ERROR("meta buffer: cannot place %s: %s\n", describe(t).text, reason.c_str());
            return GGML_STATUS_FAILED;
        }
        sl.state = vp.state;
        if (!is_view_op(t->op) && t->op != GGML_OP_NONE) {
            const SplitState d = derive_state(t, n, reason);
            if (d.axis == GGML_BACKEND_SPLIT_AXIS_UNKNOWN || !same_shares(d, sl.state, n)) {
                LOOM_LOG_ERROR("meta buffer: %s (%s) writes into a tensor split differently: %s\n",
                               describe(t).text, ggml_op_desc(t), reason.c_str());
                return GGML_STATUS_FAILED;
            }
        }
    } else if (t->op == GGML_OP_NONE) {
        sl.state = dev->ask_split_state(t);
        if (!check_user_state(t, sl.state, n, reason)) {
            LOOM_LOG_ERROR("meta buffer: tensor %s: %s\n", describe(t).text, reason.c_str());
            return GGML_STATUS_FAILED;
        }
        // Note [Partial leaves]
        // A tensor the user sets, declared a partial sum (llama.cpp's experts'
        // down bias, added to the experts' partial product), holds its whole
        // value on every member: computed partial sums are reduced right after
        // the node that makes them, so what meets the leaf is the reduced
        // value, and a mirrored leaf is what adds to it. Its logical value is
        // the one set, as for a partial sum.
        if (sl.state.axis == GGML_BACKEND_SPLIT_AXIS_PARTIAL) {
            sl.state = mirrored_state();
        }
    } else {
        sl.state = derive_state(t, n, reason);
        if (sl.state.axis == GGML_BACKEND_SPLIT_AXIS_UNKNOWN) {
            LOOM_LOG_ERROR("meta buffer: no split state for %s (%s): %s\n", describe(t).text, ggml_op_desc(t),
                           reason.c_str());
            return GGML_STATUS_FAILED;
        }
    }
    const int a = sl.state.axis;
    sl.data     = t->data;
    sl.type     = t->type;
    std::copy(t->ne, t->ne + GGML_MAX_DIMS, sl.ne);
    std::copy(t->nb, t->nb + GGML_MAX_DIMS, sl.nb);
    sl.view_src  = t->view_src;
    sl.view_offs = t->view_offs;
    sl.op        = t->op;
    static std::atomic<uint64_t> next_serial{1};
    sl.serial = next_serial++;
    sl.active.assign(n, true);
    for (size_t j = 0; j < n; ++j) {
        auto part = std::make_unique<ggml_tensor>(*t);
        ggml_tensor * p = part.get();
        p->extra        = nullptr;
        if (root == nullptr) {
            if (is_split_axis(a)) {
                p->ne[a] = share(sl.state, n, j);
            }
            contiguous_strides(p);
            p->buffer    = members_[j];
            p->data      = static_cast<char *>(members_[j]->base()) + (static_cast<char *>(t->data) - k_base);
            p->view_src  = nullptr;
            p->view_offs = 0;
        } else {
            ggml_tensor * rp = find(root)->parts[j].get();
            if (vp.dim == -2) {
                p->ne[a] = vp.ne_split[j];
                contiguous_strides(p);
            } else if (vp.dim >= 0) {
                p->ne[vp.dim] = vp.ne_split[j];
                const ggml_tensor * gp = slices_of(is_view_op(t->op) && t->src[0] != nullptr ? t->src[0] : root)
                                             ->parts[j]
                                             .get();
                for (int k = 0; k < GGML_MAX_DIMS; ++k) {
                    if (vp.map[k] >= 0) p->nb[k] = gp->nb[vp.map[k]] * size_t(vp.mul[k]);
                }
            }
            p->view_src  = rp;
            p->view_offs = vp.offs[j];
            p->buffer    = rp->buffer;
            p->data      = static_cast<char *>(rp->data) + vp.offs[j];
        }
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            ggml_tensor * s = t->src[i];
            if (s == t) {
                p->src[i] = p;
            } else if (s != nullptr) {
                const Slices * ss = slices_of(s);
                if (ss == nullptr) {
                    LOOM_LOG_ERROR("meta buffer: source %s of %s is not in a meta buffer\n", describe(s).text,
                                   describe(t).text);
                    return GGML_STATUS_FAILED;
                }
                p->src[i]         = ss->parts[j].get();
                sl.src_serials[i] = ss->serial;
                if (is_split_axis(ss->state.axis) && share(ss->state, n, j) == 0) {
                    sl.active[j] = false;
                }
            }
        }
        if (ggml_nelements(p) == 0) {
            sl.active[j] = false;
        }
        const ggml_status st = p->buffer->init_tensor(p);
        if (st != GGML_STATUS_SUCCESS) {
            return st;
        }
        sl.parts.push_back(std::move(part));
    }
    tensors_.emplace(t, std::move(sl));
    return GGML_STATUS_SUCCESS;
}

namespace {

// Calls fn(member, meta offset, member offset, bytes) for each piece of a
// contiguous tensor split along an axis, in the meta tensor's order.
template <typename Fn> void for_each_piece(const ggml_tensor * t, const SplitState & s, size_t n, Fn && fn) {
    const int a = s.axis;
    int64_t   outer = 1;
    for (int k = a + 1; k < GGML_MAX_DIMS; ++k) outer *= t->ne[k];
    auto bytes_of = [&](int64_t count) {
        return a == 0 ? ggml_row_size(t->type, count) : size_t(count) * t->nb[a];
    };
    const size_t        meta_stride = bytes_of(t->ne[a]);
    std::vector<size_t> dev_stride(n);
    for (size_t j = 0; j < n; ++j) dev_stride[j] = bytes_of(share(s, n, j));
    std::vector<size_t> within(n);
    for (int64_t o = 0; o < outer; ++o) {
        size_t meta_pos = size_t(o) * meta_stride;
        std::fill(within.begin(), within.end(), 0);
        for (uint32_t seg = 0; seg < s.n_segments; ++seg) {
            for (uint32_t r = 0; r < s.nr[seg]; ++r) {
                for (size_t j = 0; j < n; ++j) {
                    const size_t b = bytes_of(s.ne[seg * n + j]);
                    if (b > 0) fn(j, meta_pos, size_t(o) * dev_stride[j] + within[j], b);
                    meta_pos += b;
                    within[j] += b;
                }
            }
        }
    }
}

} // namespace

// Note [Transfers of views]
// A view's bytes are its root's bytes from view_offs on, whatever the view's
// own split state, so a transfer of a view is one of its root (placed in this
// buffer) at the view's offset: it reaches every member that holds a piece of
// the range, including strided views and views that cut a member's piece.
ggml_tensor * Buffer::root_in_this_buffer(const ggml_tensor * t) {
    ggml_tensor * root = t->view_src;
    return root != nullptr && root->buffer == this && find(root) != nullptr ? root : nullptr;
}

void Buffer::set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n_bytes) {
    if (ggml_tensor * root = root_in_this_buffer(t)) { // Note [Transfers of views]
        set_tensor(root, data, t->view_offs + offset, n_bytes);
        return;
    }
    const Slices * sl = find(t);
    LOOM_REQUIRE(sl != nullptr, "tensor %s is not placed in meta buffer", describe(t).text);
    const size_t n = members_.size();
    const int    a = sl->state.axis;
    if (!is_split_axis(a)) {
        for (size_t j = 0; j < n; ++j) {
            ggml_tensor * p = sl->parts[j].get();
            if (a == GGML_BACKEND_SPLIT_AXIS_PARTIAL && j > 0) {
                p->buffer->memset_tensor(p, 0, offset, n_bytes);
            } else {
                p->buffer->set_tensor(p, data, offset, n_bytes);
            }
        }
        return;
    }
    LOOM_REQUIRE(t->view_src == nullptr, "tensor %s is a view of a split tensor; set its source instead",
                 describe(t).text);
    const char * src = static_cast<const char *>(data);
    if (offset == 0 && n_bytes == ggml_nbytes(t)) {
        // The whole tensor: one transfer per member.
        std::vector<std::vector<char>> staging(n);
        for (size_t j = 0; j < n; ++j) staging[j].resize(ggml_nbytes(sl->parts[j].get()));
        for_each_piece(t, sl->state, n, [&](size_t j, size_t mo, size_t dofs, size_t b) {
            std::memcpy(staging[j].data() + dofs, src + mo, b);
        });
        for (size_t j = 0; j < n; ++j) {
            if (!staging[j].empty()) {
                ggml_tensor * p = sl->parts[j].get();
                p->buffer->set_tensor(p, staging[j].data(), 0, staging[j].size());
            }
        }
        return;
    }
    for_each_piece(t, sl->state, n, [&](size_t j, size_t mo, size_t dofs, size_t b) {
        const size_t lo = std::max(mo, offset), hi = std::min(mo + b, offset + n_bytes);
        if (lo < hi) {
            ggml_tensor * p = sl->parts[j].get();
            p->buffer->set_tensor(p, src + (lo - offset), dofs + (lo - mo), hi - lo);
        }
    });
}

void Buffer::get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n_bytes) {
    if (const ggml_tensor * root = root_in_this_buffer(t)) { // Note [Transfers of views]
        get_tensor(root, data, t->view_offs + offset, n_bytes);
        return;
    }
    const Slices * sl = find(t);
    LOOM_REQUIRE(sl != nullptr, "tensor %s is not placed in meta buffer", describe(t).text);
    const size_t n   = members_.size();
    const int    a   = sl->state.axis;
    char *       dst = static_cast<char *>(data);
    if (a == GGML_BACKEND_SPLIT_AXIS_PARTIAL && t->type == GGML_TYPE_F32 && offset % 4 == 0 && n_bytes % 4 == 0) {
        std::vector<float> sum(n_bytes / 4, 0.0f), part(n_bytes / 4);
        for (size_t j = 0; j < n; ++j) {
            ggml_tensor * p = sl->parts[j].get();
            p->buffer->get_tensor(p, part.data(), offset, n_bytes);
            for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
        std::memcpy(dst, sum.data(), n_bytes);
        return;
    }
    if (!is_split_axis(a)) {
        ggml_tensor * p = sl->parts[0].get();
        p->buffer->get_tensor(p, data, offset, n_bytes);
        return;
    }
    LOOM_REQUIRE(t->view_src == nullptr, "tensor %s is a view of a split tensor; read its source instead",
                 describe(t).text);
    if (offset == 0 && n_bytes == ggml_nbytes(t)) {
        std::vector<std::vector<char>> staging(n);
        for (size_t j = 0; j < n; ++j) {
            ggml_tensor * p = sl->parts[j].get();
            staging[j].resize(ggml_nbytes(p));
            if (!staging[j].empty()) p->buffer->get_tensor(p, staging[j].data(), 0, staging[j].size());
        }
        for_each_piece(t, sl->state, n, [&](size_t j, size_t mo, size_t dofs, size_t b) {
            std::memcpy(dst + mo, staging[j].data() + dofs, b);
        });
        return;
    }
    for_each_piece(t, sl->state, n, [&](size_t j, size_t mo, size_t dofs, size_t b) {
        const size_t lo = std::max(mo, offset), hi = std::min(mo + b, offset + n_bytes);
        if (lo < hi) {
            ggml_tensor * p = sl->parts[j].get();
            p->buffer->get_tensor(p, dst + (lo - offset), dofs + (lo - mo), hi - lo);
        }
    });
}

void Buffer::memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n_bytes) {
    if (ggml_tensor * root = root_in_this_buffer(t)) { // Note [Transfers of views]
        memset_tensor(root, value, t->view_offs + offset, n_bytes);
        return;
    }
    const Slices * sl = find(t);
    LOOM_REQUIRE(sl != nullptr, "tensor %s is not placed in meta buffer", describe(t).text);
    const size_t n = members_.size();
    if (!is_split_axis(sl->state.axis)) {
        for (size_t j = 0; j < n; ++j) {
            ggml_tensor * p = sl->parts[j].get();
            const bool    zero = sl->state.axis == GGML_BACKEND_SPLIT_AXIS_PARTIAL && j > 0;
            p->buffer->memset_tensor(p, zero ? 0 : value, offset, n_bytes);
        }
        return;
    }
    LOOM_REQUIRE(t->view_src == nullptr, "tensor %s is a view of a split tensor", describe(t).text);
    for_each_piece(t, sl->state, n, [&](size_t j, size_t mo, size_t dofs, size_t b) {
        const size_t lo = std::max(mo, offset), hi = std::min(mo + b, offset + n_bytes);
        if (lo < hi) {
            ggml_tensor * p = sl->parts[j].get();
            p->buffer->memset_tensor(p, value, dofs + (lo - mo), hi - lo);
        }
    });
}

void Buffer::clear(uint8_t value) {
    for (ggml_backend_buffer * b : members_) b->clear(value);
}

void Buffer::reset() {
    tensors_.clear();
    for (ggml_backend_buffer * b : members_) b->reset();
}

void Buffer::set_usage(ggml_backend_buffer_usage u) {
    usage = u;
    for (ggml_backend_buffer * b : members_) b->set_usage(u);
}

} // namespace loom::meta
