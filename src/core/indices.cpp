// Checking indices read from data (Note [Index sources] in op_table.h).

#include "indices.h"

#include <cstdio>
#include <cstring>

#include "common.h"

namespace loom {

int64_t index_limit(const ggml_tensor * node) {
    const OpInfo * info = op_info(node->op);
    if (info == nullptr || info->indices.srcs == 0) {
        return 0;
    }
    const ggml_tensor * of = info->indices.bound == k_bound_node ? node : node->src[info->indices.bound];
    return of != nullptr ? of->ne[info->indices.dim] : 0;
}

bool find_bad_index(const ggml_tensor * t, const void * base, int64_t limit, BadIndex * out) {
    const bool    wide = t->type == GGML_TYPE_I64;
    const auto *  p    = static_cast<const uint8_t *>(base);
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                const uint8_t * row = p + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    int64_t v;
                    if (wide) {
                        std::memcpy(&v, row + i0 * t->nb[0], sizeof(v));
                    } else {
                        int32_t w;
                        std::memcpy(&w, row + i0 * t->nb[0], sizeof(w));
                        v = w;
                    }
                    if (v < 0 || v >= limit) {
                        out->value = v;
                        out->at[0] = i0;
                        out->at[1] = i1;
                        out->at[2] = i2;
                        out->at[3] = i3;
                        out->limit = limit;
                        return true;
                    }
                }
            }
        }
    }
    return false;
}

std::string bad_index_text(const ggml_tensor * node, const BadIndex & b) {
    char text[512];
    std::snprintf(text, sizeof(text), "%s '%s': index %lld at [%lld, %lld, %lld, %lld] of src[%d] %s is outside [0, %lld)",
                  ggml_op_desc(node), node->name, (long long) b.value, (long long) b.at[0], (long long) b.at[1],
                  (long long) b.at[2], (long long) b.at[3], b.src, describe(node->src[b.src]).text, (long long) b.limit);
    return text;
}

} // namespace loom
