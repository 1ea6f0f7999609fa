// The i-quants: block layouts bit-identical to ggml's.

#include "core/types.h"

namespace loom {

void add_iq_types(TypeRows & rows) {
    (void) rows;
}

} // namespace loom
