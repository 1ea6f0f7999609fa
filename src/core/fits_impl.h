#pragma once

// What the rules' files (fits_*.cpp) share: the message of a refused node
// and the checks most rules make. Note [Shape rules] in fits.h.

#include <cstdint>
#include <string>

#include "common.h"
#include "fits.h"

namespace loom::fits {

// Sizes are computed wide: a node from the network may carry any sizes and
// op params, and no product of a few of them overflows 128 bits.
using wide = __int128;

// Sets *why (when not NULL) to the formatted text; returns false.
bool refuse(std::string * why, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

// The operator as node_fits names it: its row's name, and the unary
// operator or gated unit of UNARY and GLU nodes.
std::string op_label(const ggml_tensor * n);

// In a rule whose parameter why is the message's: refuses the node with the
// message unless cond holds. The message's arguments are
// evaluated only then.
#define LOOM_FITS(cond, ...) \
    do { \
        if (!(cond)) [[unlikely]] { \
            return ::loom::fits::refuse(why, __VA_ARGS__); \
        } \
    } while (0)

// "[ne0, ne1, ne2, ne3]" of four wide sizes, for messages.
struct ShapeText {
    char text[160];
};
ShapeText shape_text(wide e0, wide e1, wide e2, wide e3);
// One wide number, for messages.
ShapeText wide_text(wide v);

// The node's shape is [e0, e1, e2, e3], the one its sources and op params
// give.
bool node_shape_is(const ggml_tensor * n, std::string * why, wide e0, wide e1, wide e2, wide e3);
// The node's type is t.
bool node_type_is(const ggml_tensor * n, std::string * why, ggml_type t);
// The node has the shape and type of src[s].
bool node_like_src(const ggml_tensor * n, std::string * why, int s);
// Sources first..last - 1 are of type t (those absent are skipped).
bool srcs_type_is(const ggml_tensor * n, std::string * why, int first, int last, ggml_type t);
// op_params[first..] are 0: parameters the operator's constructor does not set.
bool params_unset_from(const ggml_tensor * n, std::string * why, int first);

inline bool same_ne(const ggml_tensor * t, wide e0, wide e1, wide e2, wide e3) {
    return t->ne[0] == e0 && t->ne[1] == e1 && t->ne[2] == e2 && t->ne[3] == e3;
}
inline bool is_float_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}
inline bool is_index_type(ggml_type t) {
    return t == GGML_TYPE_I32 || t == GGML_TYPE_I64;
}
// d > 0 divides v.
inline bool divides(int64_t d, int64_t v) {
    return d > 0 && v % d == 0;
}

} // namespace loom::fits
