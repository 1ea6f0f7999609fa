// The K-quants, Q2_K to Q8_K: block layouts bit-identical to ggml's.

#include "core/types.h"

namespace loom {

void add_k_types(TypeRows & rows) {
    (void) rows;
}

} // namespace loom
