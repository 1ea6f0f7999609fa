#pragma once

// Addressing elements and rows of a tensor by index, for kernels that walk
// tensors of any strides.

#include <cstdint>

#include "ggml.h"

namespace loom::cpu {

// The position of row ir of a tensor with ne[1] rows per matrix and ne[2]
// matrices per batch.
struct RowPos {
    int64_t i1, i2, i3;
};
inline RowPos row_pos(int64_t ir, const int64_t * ne) {
    return {ir % ne[1], ir / ne[1] % ne[2], ir / (ne[1] * ne[2])};
}

// The address of element (i0, i1, i2, i3).
inline const char * element_at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i0 * int64_t(t->nb[0]) + i1 * int64_t(t->nb[1]) +
           i2 * int64_t(t->nb[2]) + i3 * int64_t(t->nb[3]);
}
inline char * element_at(ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return const_cast<char *>(element_at(static_cast<const ggml_tensor *>(t), i0, i1, i2, i3));
}

} // namespace loom::cpu
