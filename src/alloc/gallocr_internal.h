#pragma once

// Entry points of the graph allocator for other parts of libloom.

#include "ggml-alloc.h"

namespace loom {

// ggml_gallocr_alloc_graph for a caller that knows graph is the graph of
// the allocator's last successful alloc_graph or reserve, with the same
// tensor objects, types, shapes, strides and flags (the scheduler, when it
// refreshes its own graph for a user graph of the same layout). Skips the
// check that the plan still fits; falls back to ggml_gallocr_alloc_graph
// when graph is not the object the plan was made or checked for.
bool gallocr_alloc_unchanged_graph(ggml_gallocr_t galloc, ggml_cgraph * graph);

} // namespace loom
