#pragma once

// Whether a node of the convolution, pooling and resampling family (IM2COL,
// IM2COL_3D, COL2IM_1D, CONV_2D, CONV_3D, CONV_2D_DW, CONV_TRANSPOSE_1D/2D,
// POOL_1D/2D, UPSCALE, WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS) fits
// its operator's rule (fits_conv.cpp, Note [Shape rules] in fits.h).

#include "ggml.h"

namespace loom {

bool is_conv_family(ggml_op op);

// false for ops outside the family.
bool conv_family_fits(const ggml_tensor * op);

} // namespace loom
