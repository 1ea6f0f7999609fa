#pragma once

// The context: an arena of objects (tensors, graphs, work buffers) laid out
// one after another in one block of memory, as in ggml, so that the sizes
// users compute with ggml_tensor_overhead / ggml_graph_overhead hold.

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace loom {

enum class ObjectType : int32_t { Tensor, Graph, WorkBuffer };

// Header preceding every object in the arena (32 bytes).
struct Object {
    size_t     offs; // of the payload, from the arena start
    size_t     size; // of the payload
    Object *   next;
    ObjectType type;
    char       padding[4];
};
static_assert(sizeof(Object) == 32, "object header size");

} // namespace loom

struct ggml_context {
    size_t  mem_size   = 0;
    void *  mem_buffer = nullptr;
    bool    mem_owned  = false;
    bool    no_alloc   = false;
    int32_t n_objects  = 0;

    loom::Object * objects_begin = nullptr;
    loom::Object * objects_end   = nullptr;

    // Reserves an object of payload size bytes; aborts naming caller when the arena is full.
    loom::Object * new_object(loom::ObjectType type, size_t size, const char * caller);
    void *         payload(const loom::Object * obj) const { return static_cast<char *>(mem_buffer) + obj->offs; }
};

namespace loom {
// Creates a tensor; view_src/view_offs make it share view_src's data.
ggml_tensor * new_tensor_impl(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne,
                              ggml_tensor * view_src, size_t view_offs, const char * caller);
} // namespace loom
