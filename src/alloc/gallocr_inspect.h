#pragma once

// A look inside a graph allocator's plan, for loom's tests and benchmarks.
// Not part of ggml's API and not installed: the layout of the plan may
// change at any time.

#include <cstddef>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"

namespace loom {

struct GallocrRegion {
    ggml_backend_buffer_t buffer;
    size_t                offset;
    size_t                size;
};

// The regions of the allocator's buffers whose last reader, in the plan of
// the last successful ggml_gallocr_reserve_n / ggml_gallocr_alloc_graph, is
// node node_index of that graph: once that node has run, their contents are
// dead until a later node of the plan writes them. A test may overwrite
// them between nodes, so that a tensor released too early reads garbage.
GGML_API std::vector<GallocrRegion> gallocr_regions_released_after(ggml_gallocr_t galloc, int node_index);

struct GallocrPlanStats {
    size_t       planned_bytes = 0; // what the plan needs, summed over chunks
    size_t       lower_bound   = 0; // peak of live bytes over the execution order
    size_t       n_blocks      = 0; // regions the plan placed
    size_t       n_inplace     = 0; // tensors computed in place (whole graph)
    const char * strategy      = "none";
    double       plan_us       = 0; // time to plan the whole graph (all buffers)
    size_t       n_plans       = 0; // plans made since the allocator was created
};

// Figures of the last plan made for buffer id buffer_id's buffer type,
// including plans made by ggml_gallocr_reserve_n_size.
GGML_API GallocrPlanStats gallocr_last_plan_stats(ggml_gallocr_t galloc, int buffer_id);

} // namespace loom
