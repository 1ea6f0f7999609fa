#include "context.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "common.h"
#include "types.h"

using namespace loom;


loom::Object * ggml_context::new_object(ObjectType type, size_t size, const char * caller) {
    const size_t cur_end = objects_end ? objects_end->offs + objects_end->size : 0;
    const size_t size_al = align_up(size, GGML_MEM_ALIGN);
    if (cur_end + sizeof(Object) + size_al > mem_size) {
        fail(caller, "not enough space in the context's memory pool (needed %zu bytes, available %zu of %zu)",
             cur_end + sizeof(Object) + size_al, mem_size - cur_end, mem_size);
    }
    auto * obj = reinterpret_cast<Object *>(static_cast<char *>(mem_buffer) + cur_end);
    *obj       = Object{cur_end + sizeof(Object), size_al, nullptr, type, {}};
    if (objects_end) {
        objects_end->next = obj;
    } else {
        objects_begin = obj;
    }
    objects_end = obj;
    ++n_objects;
    return obj;
}

ggml_tensor * loom::new_tensor_impl(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne,
                                    ggml_tensor * view_src, size_t view_offs, const char * caller) {
    LOOM_REQUIRE(ctx != nullptr, "called from %s with a NULL context", caller);
    LOOM_REQUIRE(n_dims >= 1 && n_dims <= GGML_MAX_DIMS, "called from %s with n_dims = %d (must be 1..%d)", caller,
                 n_dims, GGML_MAX_DIMS);
    const TypeInfo & ti = type_info(type, caller);
    for (int i = 0; i < n_dims; ++i) {
        LOOM_REQUIRE(ne[i] >= 0, "called from %s with ne[%d] = %lld < 0", caller, i, (long long) ne[i]);
    }
    LOOM_REQUIRE(ne[0] % ti.blck_size == 0, "called from %s: ne[0] = %lld is not a multiple of the %s block size %lld",
                 caller, (long long) ne[0], ti.name, (long long) ti.blck_size);

    if (view_src != nullptr && view_src->view_src != nullptr) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }

    size_t data_size = ti.type_size * size_t(ne[0] / ti.blck_size);
    for (int i = 1; i < n_dims; ++i) {
        data_size *= size_t(ne[i]);
    }
    // A view of no elements reads nothing: any offset will do, as in ggml
    // (llama.cpp views the empty state of a sequence past its source's end).
    if (view_src != nullptr && data_size != 0) {
        LOOM_REQUIRE(view_offs + data_size <= ggml_nbytes(view_src),
                     "called from %s: a view of %zu bytes at offset %zu exceeds '%s' (%zu bytes)", caller, data_size,
                     view_offs, view_src->name, ggml_nbytes(view_src));
    }

    void * data = nullptr;
    if (view_src != nullptr && view_src->data != nullptr) {
        data = static_cast<char *>(view_src->data) + view_offs;
    }

    const bool own_data = view_src == nullptr && !ctx->no_alloc;
    Object *   obj      = ctx->new_object(ObjectType::Tensor, sizeof(ggml_tensor) + (own_data ? data_size : 0), caller);
    auto *     t        = static_cast<ggml_tensor *>(ctx->payload(obj));
    std::memset(t, 0, sizeof(*t));
    t->type      = type;
    t->buffer    = view_src ? view_src->buffer : nullptr;
    t->op        = GGML_OP_NONE;
    t->view_src  = view_src;
    t->view_offs = view_offs;
    t->data      = own_data ? static_cast<void *>(t + 1) : data;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        t->ne[i] = i < n_dims ? ne[i] : 1;
    }
    t->nb[0] = ti.type_size;
    t->nb[1] = t->nb[0] * size_t(t->ne[0] / ti.blck_size);
    for (int i = 2; i < GGML_MAX_DIMS; ++i) {
        t->nb[i] = t->nb[i - 1] * size_t(t->ne[i - 1]);
    }
    return t;
}

extern "C" {

size_t ggml_tensor_overhead(void) {
    return sizeof(Object) + sizeof(ggml_tensor);
}

ggml_context * ggml_init(ggml_init_params params) {
    auto * ctx = new (std::nothrow) ggml_context();
    if (ctx == nullptr) {
        return nullptr;
    }
    ctx->mem_size = params.mem_size;
    ctx->no_alloc = params.no_alloc;
    if (params.mem_buffer != nullptr) {
        ctx->mem_buffer = params.mem_buffer;
    } else if (params.mem_size > 0) {
        ctx->mem_size   = align_up(params.mem_size, GGML_MEM_ALIGN);
        ctx->mem_buffer = std::aligned_alloc(64, align_up(ctx->mem_size, 64));
        if (ctx->mem_buffer == nullptr) {
            LOOM_LOG_ERROR("ggml_init: failed to allocate %zu bytes for the context\n", ctx->mem_size);
            delete ctx;
            return nullptr;
        }
        ctx->mem_owned = true;
    }
    return ctx;
}

void ggml_reset(ggml_context * ctx) {
    if (ctx == nullptr) {
        return;
    }
    ctx->n_objects     = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end   = nullptr;
}

void ggml_free(ggml_context * ctx) {
    if (ctx == nullptr) {
        return;
    }
    if (ctx->mem_owned) {
        std::free(ctx->mem_buffer);
    }
    delete ctx;
}

size_t ggml_used_mem(const ggml_context * ctx) {
    return ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
}
bool ggml_get_no_alloc(ggml_context * ctx) {
    return ctx->no_alloc;
}
void ggml_set_no_alloc(ggml_context * ctx, bool no_alloc) {
    ctx->no_alloc = no_alloc;
}
void * ggml_get_mem_buffer(const ggml_context * ctx) {
    return ctx->mem_buffer;
}
size_t ggml_get_mem_size(const ggml_context * ctx) {
    return ctx->mem_size;
}

size_t ggml_get_max_tensor_size(const ggml_context * ctx) {
    size_t max_size = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        max_size = std::max(max_size, ggml_nbytes(t));
    }
    return max_size;
}

void * ggml_new_buffer(ggml_context * ctx, size_t nbytes) {
    Object * obj = ctx->new_object(ObjectType::WorkBuffer, nbytes, __func__);
    return ctx->payload(obj);
}

ggml_tensor * ggml_new_tensor(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne) {
    return new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0, __func__);
}
ggml_tensor * ggml_new_tensor_1d(ggml_context * ctx, ggml_type type, int64_t ne0) {
    return new_tensor_impl(ctx, type, 1, &ne0, nullptr, 0, __func__);
}
ggml_tensor * ggml_new_tensor_2d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return new_tensor_impl(ctx, type, 2, ne, nullptr, 0, __func__);
}
ggml_tensor * ggml_new_tensor_3d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return new_tensor_impl(ctx, type, 3, ne, nullptr, 0, __func__);
}
ggml_tensor * ggml_new_tensor_4d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                                 int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return new_tensor_impl(ctx, type, 4, ne, nullptr, 0, __func__);
}

ggml_tensor * ggml_dup_tensor(ggml_context * ctx, const ggml_tensor * src) {
    return new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, nullptr, 0, __func__);
}

ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx) {
    for (Object * obj = ctx->objects_begin; obj != nullptr; obj = obj->next) {
        if (obj->type == ObjectType::Tensor) {
            return static_cast<ggml_tensor *>(ctx->payload(obj));
        }
    }
    return nullptr;
}

ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * tensor) {
    auto * obj = reinterpret_cast<Object *>(reinterpret_cast<char *>(tensor) - sizeof(Object));
    for (obj = obj->next; obj != nullptr; obj = obj->next) {
        if (obj->type == ObjectType::Tensor) {
            return static_cast<ggml_tensor *>(ctx->payload(obj));
        }
    }
    return nullptr;
}

// The header of each object is a loom::Object; ggml_object is its public name.
void ggml_print_object(const ggml_object * obj) {
    const auto * o = reinterpret_cast<const Object *>(obj);
    LOOM_LOG_INFO(" - ggml_object: type = %d, offset = %zu, size = %zu, next = %p\n", int(o->type), o->offs, o->size,
                  static_cast<const void *>(o->next));
}

void ggml_print_objects(const ggml_context * ctx) {
    LOOM_LOG_INFO("%s: objects in context %p:\n", __func__, static_cast<const void *>(ctx));
    for (const Object * o = ctx->objects_begin; o != nullptr; o = o->next) {
        ggml_print_object(reinterpret_cast<const ggml_object *>(o));
    }
    LOOM_LOG_INFO("%s: --- end ---\n", __func__);
}

ggml_tensor * ggml_get_tensor(ggml_context * ctx, const char * name) {
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        if (std::strcmp(t->name, name) == 0) {
            return t;
        }
    }
    return nullptr;
}

} // extern "C"
