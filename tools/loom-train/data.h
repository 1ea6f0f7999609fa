#pragma once

// The data loom-train learns: points of `classes` interleaved spirals in
// the unit disc, each labelled with its spiral (one-hot), in an order drawn
// from the seed so that every part of the set (training or validation
// batches) holds points of every radius.

#include <cstdint>

#include "ggml-opt.h"

namespace loom_train {

// A dataset of n points (data [2, n], labels [classes, n], F32), n a
// multiple of the batch size. The same arguments give the same points.
// The caller frees it with ggml_opt_dataset_free.
ggml_opt_dataset_t make_spirals(int classes, int64_t n, uint32_t seed);

} // namespace loom_train
