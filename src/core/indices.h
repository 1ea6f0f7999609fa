#pragma once

// Checking the indices an operator reads from its sources' data
// (op_table.h, Note [Index sources]). Core reads no device: the caller
// gives the bytes of each index source (its data on a host device, a copy
// read through its buffer elsewhere).

#include <cstdint>
#include <string>

#include "ggml.h"
#include "op_table.h"

namespace loom {

// The number the indices of node's index sources must stay below: the
// bounding dimension named in node's row. 0 for an op without index
// sources.
int64_t index_limit(const ggml_tensor * node);

// An index outside [0, limit) and where it was read.
struct BadIndex {
    int     src   = 0;      // the source that holds it
    int64_t value = 0;
    int64_t at[GGML_MAX_DIMS] = {};
    int64_t limit = 0;
};

// The first element (in memory order of the dimensions, i0 fastest) of
// index tensor t outside [0, limit); base points at t's first byte and the
// elements lie at t's strides from it; t is I32 or I64. false when all lie
// inside.
bool find_bad_index(const ggml_tensor * t, const void * base, int64_t limit, BadIndex * out);

// The first bad index of any index source of node, reading source s's
// bytes from bytes_of(s) (a const void *; nullptr skips the source).
template <typename BytesOf>
bool find_bad_index(const ggml_tensor * node, BytesOf bytes_of, BadIndex * out) {
    const uint8_t srcs = index_srcs(node->op);
    if (srcs == 0) {
        return false;
    }
    const int64_t limit = index_limit(node);
    for (int s = 0; s < GGML_MAX_SRC; ++s) {
        if ((srcs & (1u << s)) == 0 || node->src[s] == nullptr) {
            continue;
        }
        const void * base = bytes_of(s);
        if (base != nullptr && find_bad_index(node->src[s], base, limit, out)) {
            out->src = s;
            return true;
        }
    }
    return false;
}

// "GET_ROWS 'name': index 7 at [3, 0, 0, 0] of src[1] 'ids' [...] is
// outside [0, 7)": the operator, the node, the value and where it was read.
std::string bad_index_text(const ggml_tensor * node, const BadIndex & b);

} // namespace loom
