// Linear allocation of tensors into one buffer, and whole-context allocation.

#include <algorithm>
#include <new>
#include <vector>

#include "core/common.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

using namespace loom;

namespace {

// A run of consecutive tensors of a context that go into one buffer.
struct Range {
    ggml_tensor * first;
    size_t        size;
};

size_t ctx_tensor_size(ggml_backend_buffer_type_t buft, const ggml_tensor * t) {
    if (t->data != nullptr || t->view_src != nullptr) {
        return 0;
    }
    return align_up(ggml_backend_buft_get_alloc_size(buft, t), ggml_backend_buft_get_alignment(buft));
}

// Cuts the context's tensors, in order, into runs that each fit the buffer
// type's max size (a tensor larger than that gets a run of its own).
// Runs with nothing to allocate are dropped.
std::vector<Range> split_into_ranges(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    const size_t       max_size = ggml_backend_buft_get_max_size(buft);
    std::vector<Range> ranges;
    Range              cur{ggml_get_first_tensor(ctx), 0};
    for (ggml_tensor * t = cur.first; t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        const size_t n = ctx_tensor_size(buft, t);
        if (cur.size > 0 && n > max_size - std::min(max_size, cur.size)) {
            ranges.push_back(cur);
            cur = Range{t, 0};
        }
        cur.size += n;
    }
    if (cur.size > 0) {
        ranges.push_back(cur);
    }
    return ranges;
}

// Buffers allocated so far and the tensors placed in them, so that a
// failure can leave the context exactly as it was.
struct Filling {
    std::vector<ggml_backend_buffer_t> buffers;
    std::vector<ggml_tensor *>         done;

    ~Filling() { undo(); }

    // Allocates a buffer for the range starting at r.first and ending before
    // last, and places its tensors (and views of placed tensors).
    bool range(ggml_context * ctx, ggml_backend_buffer_type_t buft, const Range & r, const ggml_tensor * last) {
        ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(buft, r.size);
        if (buffer == nullptr) {
            LOOM_LOG_ERROR("ggml_backend_alloc_ctx_tensors_from_buft: failed to allocate a %s buffer of %zu bytes\n",
                           ggml_backend_buft_name(buft), r.size);
            return false;
        }
        buffers.push_back(buffer);
        ggml_tallocr talloc = ggml_tallocr_new(buffer);
        for (ggml_tensor * t = r.first; t != last; t = ggml_get_next_tensor(ctx, t)) {
            ggml_status st = GGML_STATUS_SUCCESS;
            if (t->data == nullptr && t->view_src == nullptr) {
                st = ggml_tallocr_alloc(&talloc, t);
            } else if (t->data == nullptr && t->view_src != nullptr && t->view_src->data != nullptr) {
                st = ggml_backend_view_init(t);
            } else {
                continue;
            }
            if (st != GGML_STATUS_SUCCESS) {
                LOOM_LOG_ERROR("ggml_backend_alloc_ctx_tensors_from_buft: failed to initialise tensor %s\n",
                               describe(t).text);
                return false;
            }
            done.push_back(t);
        }
        return true;
    }

    ggml_backend_buffer_t release() {
        ggml_backend_buffer_t b = buffers.front();
        buffers.clear();
        done.clear();
        return b;
    }

    void undo() {
        for (ggml_tensor * t : done) {
            t->buffer = nullptr;
            t->data   = nullptr;
        }
        done.clear();
        for (ggml_backend_buffer_t b : buffers) {
            ggml_backend_buffer_free(b);
        }
        buffers.clear();
    }
};

} // namespace

extern "C" {

ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer) {
    LOOM_REQUIRE(buffer != nullptr, "NULL buffer");
    void * base  = ggml_backend_buffer_get_base(buffer);
    size_t align = ggml_backend_buffer_get_alignment(buffer);
    LOOM_REQUIRE(align > 0 && (align & (align - 1)) == 0, "buffer %s has alignment %zu, not a power of two",
                 ggml_backend_buffer_name(buffer), align);
    // The first tensor goes at the first aligned address of the buffer.
    const size_t offset = align_up(reinterpret_cast<uintptr_t>(base), align) - reinterpret_cast<uintptr_t>(base);
    return ggml_tallocr{buffer, base, align, offset};
}

ggml_status ggml_tallocr_alloc(ggml_tallocr * talloc, ggml_tensor * tensor) {
    const size_t size = ggml_backend_buffer_get_alloc_size(talloc->buffer, tensor);
    const size_t cap  = ggml_backend_buffer_get_size(talloc->buffer);
    if (talloc->offset > cap || size > cap - talloc->offset) {
        LOOM_LOG_ERROR("ggml_tallocr_alloc: not enough space in buffer %s for tensor %s (needed %zu bytes, %zu of %zu "
                       "available)\n",
                       ggml_backend_buffer_name(talloc->buffer), describe(tensor).text, size,
                       talloc->offset > cap ? size_t(0) : cap - talloc->offset, cap);
        return GGML_STATUS_ALLOC_FAILED;
    }
    void * addr = static_cast<char *>(talloc->base) + talloc->offset;
    talloc->offset += align_up(size, talloc->alignment);
    return ggml_backend_tensor_alloc(talloc->buffer, tensor, addr);
}

size_t ggml_backend_alloc_ctx_tensors_from_buft_size(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    LOOM_REQUIRE(ctx != nullptr && buft != nullptr, "NULL context or buffer type");
    size_t total = 0;
    for (const Range & r : split_into_ranges(ctx, buft)) {
        total += r.size;
    }
    return total;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    LOOM_REQUIRE(ctx != nullptr && buft != nullptr, "NULL context or buffer type");
    LOOM_REQUIRE(ggml_get_no_alloc(ctx), "the context must be created with no_alloc = true");

    std::vector<Range> ranges;
    try {
        ranges = split_into_ranges(ctx, buft);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_backend_alloc_ctx_tensors_from_buft: out of memory\n");
        return nullptr;
    }
    if (ranges.empty()) {
        // Nothing to allocate (ggml returns NULL here too, without error);
        // views of tensors that already have data still get theirs.
        for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
            if (t->data == nullptr && t->view_src != nullptr && t->view_src->data != nullptr) {
                ggml_backend_view_init(t);
            }
        }
        return nullptr;
    }

    Filling fill;
    for (size_t i = 0; i < ranges.size(); ++i) {
        const Range & r = ranges[i];
        if (r.size > ggml_backend_buft_get_max_size(buft)) {
            LOOM_LOG_WARN("ggml_backend_alloc_ctx_tensors_from_buft: tensor %s alone needs %zu bytes, more than "
                          "the %zu a %s buffer may hold; trying anyway\n",
                          describe(r.first).text, r.size, ggml_backend_buft_get_max_size(buft),
                          ggml_backend_buft_name(buft));
        }
        if (!fill.range(ctx, buft, r, i + 1 < ranges.size() ? ranges[i + 1].first : nullptr)) {
            fill.undo();
            return nullptr;
        }
    }
    if (fill.buffers.size() == 1) {
        return fill.release();
    }
    ggml_backend_buffer_t multi = ggml_backend_multi_buffer_alloc_buffer(fill.buffers.data(), fill.buffers.size());
    if (multi == nullptr) {
        fill.undo();
        return nullptr;
    }
    fill.buffers.clear(); // now owned by the multi-buffer
    fill.done.clear();
    return multi;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend) {
    return ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(backend));
}

} // extern "C"
