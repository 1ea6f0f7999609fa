// Shape queries, names and flags of tensors.

#include <cstdio>

#include "common.h"
#include "context.h"
#include "types.h"

using namespace loom;

namespace loom {
TensorDesc describe(const ggml_tensor * t) {
    TensorDesc d{};
    if (t == nullptr) {
        std::snprintf(d.text, sizeof(d.text), "(null)");
    } else {
        std::snprintf(d.text, sizeof(d.text), "'%s' [%lld, %lld, %lld, %lld] %s", t->name, (long long) t->ne[0],
                      (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], ggml_type_name(t->type));
    }
    return d;
}
} // namespace loom

extern "C" {

int64_t ggml_nelements(const ggml_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t ggml_nrows(const ggml_tensor * t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t ggml_nbytes(const ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] <= 0) {
            return 0;
        }
    }
    const int64_t blck = ggml_blck_size(t->type);
    size_t        nbytes;
    if (blck == 1) {
        nbytes = ggml_type_size(t->type);
        for (int i = 0; i < GGML_MAX_DIMS; ++i) {
            nbytes += size_t(t->ne[i] - 1) * t->nb[i];
        }
    } else {
        nbytes = size_t(t->ne[0]) * t->nb[0] / size_t(blck);
        for (int i = 1; i < GGML_MAX_DIMS; ++i) {
            nbytes += size_t(t->ne[i] - 1) * t->nb[i];
        }
    }
    return nbytes;
}

size_t ggml_nbytes_pad(const ggml_tensor * t) {
    return GGML_PAD(ggml_nbytes(t), GGML_MEM_ALIGN);
}

size_t ggml_element_size(const ggml_tensor * t) {
    return ggml_type_size(t->type);
}

bool ggml_is_transposed(const ggml_tensor * t) {
    return t->nb[0] > t->nb[1];
}

bool ggml_is_permuted(const ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool ggml_is_empty(const ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] == 0) {
            return true;
        }
    }
    return false;
}

bool ggml_is_view(const ggml_tensor * t) {
    return t->view_src != nullptr;
}

bool ggml_is_scalar(const ggml_tensor * t) {
    return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}
bool ggml_is_vector(const ggml_tensor * t) {
    return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}
bool ggml_is_matrix(const ggml_tensor * t) {
    return t->ne[2] == 1 && t->ne[3] == 1;
}
bool ggml_is_3d(const ggml_tensor * t) {
    return t->ne[3] == 1;
}

int ggml_n_dims(const ggml_tensor * t) {
    for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) {
            return i + 1;
        }
    }
    return 1;
}

// Contiguous in dimensions >= n: every dimension from n on follows the
// previous one without gaps (dimensions of size 1 are ignored).
static bool contiguous_from(const ggml_tensor * t, int n) {
    size_t next_nb = ggml_type_size(t->type);
    if (t->ne[0] != ggml_blck_size(t->type) && t->nb[0] != next_nb) {
        return false;
    }
    next_nb *= size_t(t->ne[0] / ggml_blck_size(t->type));
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] != 1) {
            if (i > n) {
                if (t->nb[i] != next_nb) {
                    return false;
                }
                next_nb *= size_t(t->ne[i]);
            } else {
                // dimensions up to n may have gaps
                next_nb = size_t(t->ne[i]) * t->nb[i];
            }
        }
    }
    return true;
}

bool ggml_is_contiguous(const ggml_tensor * t) {
    return contiguous_from(t, 0);
}
bool ggml_is_contiguous_0(const ggml_tensor * t) {
    return contiguous_from(t, 0);
}
bool ggml_is_contiguous_1(const ggml_tensor * t) {
    return contiguous_from(t, 1);
}
bool ggml_is_contiguous_2(const ggml_tensor * t) {
    return contiguous_from(t, 2);
}

// Contiguous in dimensions below n: dimension 0 holds adjacent elements and
// each dimension in [1, n) follows the previous one without gaps (those of
// size 1 are ignored); the dimensions from n on may have any strides.
static bool contiguous_below(const ggml_tensor * t, int n) {
    size_t next_nb = ggml_type_size(t->type);
    if (t->ne[0] != ggml_blck_size(t->type) && t->nb[0] != next_nb) {
        return false;
    }
    next_nb *= size_t(t->ne[0] / ggml_blck_size(t->type));
    for (int i = 1; i < n; ++i) {
        if (t->ne[i] != 1) {
            if (t->nb[i] != next_nb) {
                return false;
            }
            next_nb *= size_t(t->ne[i]);
        }
    }
    return true;
}

bool ggml_is_contiguous_to_1(const ggml_tensor * t) {
    return contiguous_below(t, 1);
}
bool ggml_is_contiguous_to_2(const ggml_tensor * t) {
    return contiguous_below(t, 2);
}
bool ggml_is_contiguous_to_3(const ggml_tensor * t) {
    return contiguous_below(t, 3);
}

bool ggml_is_contiguously_allocated(const ggml_tensor * t) {
    return ggml_nbytes(t) == size_t(ggml_nelements(t)) * ggml_type_size(t->type) / size_t(ggml_blck_size(t->type));
}

bool ggml_is_contiguous_channels(const ggml_tensor * t) {
    return t->nb[0] > t->nb[2] && t->nb[1] > t->nb[0] && t->nb[2] == ggml_type_size(t->type);
}

bool ggml_is_contiguous_rows(const ggml_tensor * t) {
    return t->ne[0] == ggml_blck_size(t->type) || t->nb[0] == ggml_type_size(t->type);
}

bool ggml_are_same_shape(const ggml_tensor * a, const ggml_tensor * b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

bool ggml_are_same_stride(const ggml_tensor * a, const ggml_tensor * b) {
    return a->nb[0] == b->nb[0] && a->nb[1] == b->nb[1] && a->nb[2] == b->nb[2] && a->nb[3] == b->nb[3];
}

bool ggml_can_repeat(const ggml_tensor * t0, const ggml_tensor * t1) {
    if (ggml_is_empty(t0)) {
        return ggml_is_empty(t1);
    }
    return t1->ne[0] % t0->ne[0] == 0 && t1->ne[1] % t0->ne[1] == 0 && t1->ne[2] % t0->ne[2] == 0 &&
           t1->ne[3] % t0->ne[3] == 0;
}

void ggml_unravel_index(const ggml_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3) {
    const int64_t ne0 = t->ne[0], ne1 = t->ne[1], ne2 = t->ne[2];
    const int64_t c3 = i / (ne2 * ne1 * ne0);
    const int64_t c2 = (i - c3 * ne2 * ne1 * ne0) / (ne1 * ne0);
    const int64_t c1 = (i - c3 * ne2 * ne1 * ne0 - c2 * ne1 * ne0) / ne0;
    const int64_t c0 = i - c3 * ne2 * ne1 * ne0 - c2 * ne1 * ne0 - c1 * ne0;
    if (i0) *i0 = c0;
    if (i1) *i1 = c1;
    if (i2) *i2 = c2;
    if (i3) *i3 = c3;
}

enum ggml_unary_op ggml_get_unary_op(const ggml_tensor * t) {
    LOOM_REQUIRE(t->op == GGML_OP_UNARY, "tensor %s is %s, not a unary op", describe(t).text, ggml_op_name(t->op));
    // op params from outside (a file, a network message) may hold any
    // int32: one that names no unary op is GGML_UNARY_OP_COUNT, never an
    // enum value outside the enum's range.
    const int32_t v = op_param_i32(t, 0);
    return v >= 0 && v < GGML_UNARY_OP_COUNT ? static_cast<ggml_unary_op>(v) : GGML_UNARY_OP_COUNT;
}

enum ggml_glu_op ggml_get_glu_op(const ggml_tensor * t) {
    LOOM_REQUIRE(t->op == GGML_OP_GLU, "tensor %s is %s, not a gated linear unit", describe(t).text,
                 ggml_op_name(t->op));
    const int32_t v = op_param_i32(t, 0); // as for ggml_get_unary_op
    return v >= 0 && v < GGML_GLU_OP_COUNT ? static_cast<ggml_glu_op>(v) : GGML_GLU_OP_COUNT;
}

void * ggml_get_data(const ggml_tensor * t) {
    return t->data;
}
float * ggml_get_data_f32(const ggml_tensor * t) {
    LOOM_REQUIRE(t->type == GGML_TYPE_F32, "tensor %s is not f32", describe(t).text);
    return static_cast<float *>(t->data);
}

const char * ggml_get_name(const ggml_tensor * t) {
    return t->name;
}

ggml_tensor * ggml_set_name(ggml_tensor * t, const char * name) {
    size_t i = 0;
    for (; i < sizeof(t->name) - 1 && name[i] != '\0'; ++i) {
        t->name[i] = name[i];
    }
    t->name[i] = '\0';
    return t;
}

ggml_tensor * ggml_format_name(ggml_tensor * t, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(t->name, sizeof(t->name), fmt, args);
    va_end(args);
    return t;
}

void ggml_set_input(ggml_tensor * t) {
    t->flags |= GGML_TENSOR_FLAG_INPUT;
}
void ggml_set_output(ggml_tensor * t) {
    t->flags |= GGML_TENSOR_FLAG_OUTPUT;
}
void ggml_set_param(ggml_tensor * t) {
    LOOM_REQUIRE(t->op == GGML_OP_NONE, "tensor %s is the result of %s; only leafs can be parameters",
                 describe(t).text, ggml_op_name(t->op));
    t->flags |= GGML_TENSOR_FLAG_PARAM;
}
void ggml_set_loss(ggml_tensor * t) {
    LOOM_REQUIRE(ggml_is_scalar(t) && t->type == GGML_TYPE_F32, "loss tensor %s must be an f32 scalar",
                 describe(t).text);
    t->flags |= GGML_TENSOR_FLAG_LOSS;
}

} // extern "C"
