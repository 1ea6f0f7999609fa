// The rules' entry points (node_fits, require_fits), what their files share
// (fits_impl.h), and the rules of the custom operators. Note [Shape rules]
// in fits.h.

#include "fits.h"

#include <cinttypes>
#include <cstdio>

#include "custom.h"
#include "fits_impl.h"

namespace loom {

namespace fits {

std::string op_label(const ggml_tensor * n) {
    const OpInfo * info  = op_info(n->op);
    std::string    label = info != nullptr ? info->name : "op " + std::to_string(int(n->op));
    if (n->op == GGML_OP_UNARY) {
        if (const UnaryInfo * u = unary_info(n->op_params[0])) {
            label = label + " (" + u->name + ")";
        }
    } else if (n->op == GGML_OP_GLU) {
        if (const GluInfo * g = glu_info(n->op_params[0])) {
            label = label + " (" + g->name + ")";
        }
    }
    return label;
}

namespace {

void append_wide(char * out, size_t size, wide v) {
    if (v >= wide(INT64_MIN) && v <= wide(INT64_MAX)) {
        std::snprintf(out, size, "%" PRId64, int64_t(v));
    } else {
        std::snprintf(out, size, "%s", v < 0 ? "-huge" : "huge");
    }
}

} // namespace

bool refuse(std::string * why, const char * fmt, ...) {
    if (why == nullptr) {
        return false;
    }
    char    text[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    *why = text;
    return false;
}

ShapeText shape_text(wide e0, wide e1, wide e2, wide e3) {
    ShapeText  s{};
    const wide e[4] = {e0, e1, e2, e3};
    char       part[4][32];
    for (int i = 0; i < 4; ++i) {
        append_wide(part[i], sizeof(part[i]), e[i]);
    }
    std::snprintf(s.text, sizeof(s.text), "[%s, %s, %s, %s]", part[0], part[1], part[2], part[3]);
    return s;
}

ShapeText wide_text(wide v) {
    ShapeText s{};
    append_wide(s.text, sizeof(s.text), v);
    return s;
}

bool node_shape_is(const ggml_tensor * n, std::string * why, wide e0, wide e1, wide e2, wide e3) {
    LOOM_FITS(same_ne(n, e0, e1, e2, e3),
              "the node's shape [%lld, %lld, %lld, %lld] and op params do not follow its sources, which give %s",
              (long long) n->ne[0], (long long) n->ne[1], (long long) n->ne[2], (long long) n->ne[3],
              shape_text(e0, e1, e2, e3).text);
    return true;
}

bool node_type_is(const ggml_tensor * n, std::string * why, ggml_type t) {
    LOOM_FITS(n->type == t, "the node %s must be %s", describe(n).text, ggml_type_name(t));
    return true;
}

bool node_like_src(const ggml_tensor * n, std::string * why, int s) {
    const ggml_tensor * a = n->src[s];
    LOOM_FITS(n->type == a->type && ggml_are_same_shape(n, a), "the node %s must have the shape and type of src[%d] %s",
              describe(n).text, s, describe(a).text);
    return true;
}

bool srcs_type_is(const ggml_tensor * n, std::string * why, int first, int last, ggml_type t) {
    for (int i = first; i < last; ++i) {
        const ggml_tensor * s = n->src[i];
        LOOM_FITS(s == nullptr || s->type == t, "src[%d] %s must be %s", i, describe(s).text, ggml_type_name(t));
    }
    return true;
}

bool params_unset_from(const ggml_tensor * n, std::string * why, int first) {
    for (int i = first; i < int(GGML_MAX_OP_PARAMS / sizeof(int32_t)); ++i) {
        LOOM_FITS(n->op_params[i] == 0, "op_params[%d] = %d: op params from [%d] on are not set by the constructor", i,
                  int(n->op_params[i]), first);
    }
    return true;
}

} // namespace fits

using namespace fits;

// ---- custom operators (Note [Custom ops] in custom.h) ----

bool fits_custom(const ggml_tensor * n, std::string * why) {
    CustomOpParams p;
    std::memcpy(&p, n->op_params, sizeof(p));
    LOOM_FITS(p.fn.f != nullptr, "NULL function");
    LOOM_FITS(p.n_tasks == GGML_N_TASKS_MAX || p.n_tasks > 0,
              "n_tasks = %d; it must be positive or GGML_N_TASKS_MAX", p.n_tasks);
    return true;
}

bool fits_map_custom(const ggml_tensor * n, std::string * why) {
    return fits_custom(n, why) && node_like_src(n, why, 0);
}

// ---- entry points ----

namespace {

// The node's sources as its row says, then its rule; why without the
// operator's name. Of an operator with a row.
bool sources_and_rule(const OpInfo & info, const ggml_tensor * n, std::string * why) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        LOOM_FITS(i >= info.min_src || n->src[i] != nullptr, "source %d missing (it needs %d)", i, int(info.min_src));
        LOOM_FITS(i < info.max_src || n->src[i] == nullptr, "unexpected source %d (it takes at most %d)", i,
                  int(info.max_src));
    }
    return info.fits(n, why);
}

} // namespace

bool node_fits(const ggml_tensor * n, std::string * why) {
    const OpInfo * info = op_info(n->op);
    if (info == nullptr) {
        if (why != nullptr) {
            *why = "op " + std::to_string(int(n->op)) + " is not an operator";
        }
        return false;
    }
    if (info->fits == nullptr) {
        return true; // NONE and the views
    }
    if (!sources_and_rule(*info, n, why)) {
        if (why != nullptr) {
            *why = op_label(n) + ": " + *why;
        }
        return false;
    }
    return true;
}

void require_fits(const ggml_tensor * node, const char * func) {
    const OpInfo * info = op_info(node->op);
    std::string    why;
    if (info != nullptr && info->fits != nullptr && !sources_and_rule(*info, node, &why)) [[unlikely]] {
        fail(func, "%s", why.c_str());
    }
}

} // namespace loom
