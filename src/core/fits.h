#pragma once

// Note [Shape rules]
// Each operator's row of the op table (op_table.h, OpInfo::fits) points at
// the one rule that says which nodes the operator allows: given a node (its
// op, sources, op params, its own ne and type), whether it is a node the
// operator's rules allow, and if not why, in a message that names the
// source and the values ("sx (src[0]) 'x' [9, 6, 2, 1] f32 must have 7
// channels (ne1) like c (src[1]) ..."), to which node_fits adds the
// operator ("SSM_CONV: sx (src[0]) ...").
//
// - The constructors (ops_*.cpp) build the node, then require_fits: a node
//   that breaks its rule is a broken precondition, and aborts with
//   "ggml_xxx: " and the message. Preconditions about arguments the node
//   does not keep (ggml_solve_tri's left / lower, a size_t that must fit an
//   op param) stay in the constructor.
// - The RPC server (backends/rpc/validate.cpp) judges every node from the
//   network with node_fits, and refuses one that breaks its rule.
// - A device's supports_op calls node_fits for the shapes, and adds only
//   the types and layouts its kernels take.
//
// A rule is about the node's shape, type and op params against its sources:
// what every device must refuse. The node's strides are not (in-place
// results and views keep their source's): whoever writes the node checks
// the layout it writes. A rule reads no tensor data (indices are data: Note
// [Index sources] in op_table.h), and forms products of sizes from
// untrusted nodes without overflow. NONE and the view operators have no
// rule (their row says nullptr): they compute nothing, and a view's bytes
// are checked where it is placed.

#include <cstdint>
#include <string>

#include "ggml.h"

namespace loom {

// why: NULL, or set to the message when the node breaks the rule. A rule
// is called with the sources its row requires present (node_fits checks).
using OpFits = bool (*)(const ggml_tensor * node, std::string * why);

// The rules, by family. Element-wise arithmetic, unary functions,
// reductions and normalisations (fits_math.cpp).
bool fits_binary(const ggml_tensor * node, std::string * why); // ADD, SUB, MUL, DIV
bool fits_add1(const ggml_tensor * node, std::string * why);
bool fits_same(const ggml_tensor * node, std::string * why); // SQR, SQRT, LOG, SIN, COS, SCALE, NORM, RMS_NORM, CLAMP, LEAKY_RELU, DIAG_MASK_INF
bool fits_sum(const ggml_tensor * node, std::string * why);
bool fits_sum_rows(const ggml_tensor * node, std::string * why); // SUM_ROWS, MEAN
bool fits_argmax(const ggml_tensor * node, std::string * why);
bool fits_group_norm(const ggml_tensor * node, std::string * why);
bool fits_unary(const ggml_tensor * node, std::string * why);
bool fits_glu(const ggml_tensor * node, std::string * why);

// Copies, repeats, concatenation, row gathers and scatters (fits_shape.cpp).
bool fits_dup(const ggml_tensor * node, std::string * why); // DUP, CONT
bool fits_cpy(const ggml_tensor * node, std::string * why);
bool fits_repeat(const ggml_tensor * node, std::string * why);
bool fits_concat(const ggml_tensor * node, std::string * why);
bool fits_get_rows(const ggml_tensor * node, std::string * why);
bool fits_set_rows(const ggml_tensor * node, std::string * why);

// Products, soft max, rotary embeddings, sorting, attention (fits_nn.cpp).
bool fits_mul_mat(const ggml_tensor * node, std::string * why);
bool fits_out_prod(const ggml_tensor * node, std::string * why);
bool fits_mul_mat_id(const ggml_tensor * node, std::string * why);
bool fits_soft_max(const ggml_tensor * node, std::string * why);
bool fits_rope(const ggml_tensor * node, std::string * why); // ROPE, ROPE_BACK
bool fits_argsort(const ggml_tensor * node, std::string * why);
bool fits_top_k(const ggml_tensor * node, std::string * why);
bool fits_flash_attn_ext(const ggml_tensor * node, std::string * why);

// Fills, masks, running sums, writes into part of a tensor, moves
// (fits_fill.cpp).
bool fits_fill(const ggml_tensor * node, std::string * why);
bool fits_arange(const ggml_tensor * node, std::string * why);
bool fits_tri(const ggml_tensor * node, std::string * why);
bool fits_cumsum(const ggml_tensor * node, std::string * why);
bool fits_count_equal(const ggml_tensor * node, std::string * why);
bool fits_l2_norm(const ggml_tensor * node, std::string * why);
bool fits_diag(const ggml_tensor * node, std::string * why);
bool fits_diag_mask_zero(const ggml_tensor * node, std::string * why);
bool fits_write_view(const ggml_tensor * node, std::string * why); // ACC, SET
bool fits_repeat_back(const ggml_tensor * node, std::string * why);
bool fits_add_id(const ggml_tensor * node, std::string * why);
bool fits_roll(const ggml_tensor * node, std::string * why);
bool fits_pad(const ggml_tensor * node, std::string * why);
bool fits_pad_reflect_1d(const ggml_tensor * node, std::string * why);
bool fits_timestep_embedding(const ggml_tensor * node, std::string * why);

// Convolutions, pooling, resampling, SAM's windows (fits_conv.cpp).
bool fits_im2col(const ggml_tensor * node, std::string * why);
bool fits_im2col_3d(const ggml_tensor * node, std::string * why);
bool fits_col2im_1d(const ggml_tensor * node, std::string * why);
bool fits_conv_2d(const ggml_tensor * node, std::string * why);
bool fits_conv_3d(const ggml_tensor * node, std::string * why);
bool fits_conv_2d_dw(const ggml_tensor * node, std::string * why);
bool fits_conv_transpose_1d(const ggml_tensor * node, std::string * why);
bool fits_conv_transpose_2d(const ggml_tensor * node, std::string * why);
bool fits_pool_1d(const ggml_tensor * node, std::string * why);
bool fits_pool_2d(const ggml_tensor * node, std::string * why);
bool fits_upscale(const ggml_tensor * node, std::string * why);
bool fits_win_part(const ggml_tensor * node, std::string * why);
bool fits_win_unpart(const ggml_tensor * node, std::string * why);
bool fits_get_rel_pos(const ggml_tensor * node, std::string * why);
bool fits_add_rel_pos(const ggml_tensor * node, std::string * why);

// State-space models, recurrences, DeepSeek's operators (fits_recurrent.cpp).
bool fits_ssm_conv(const ggml_tensor * node, std::string * why);
bool fits_ssm_scan(const ggml_tensor * node, std::string * why);
bool fits_rwkv_wkv6(const ggml_tensor * node, std::string * why);
bool fits_gated_linear_attn(const ggml_tensor * node, std::string * why);
bool fits_rwkv_wkv7(const ggml_tensor * node, std::string * why);
bool fits_solve_tri(const ggml_tensor * node, std::string * why);
bool fits_gated_delta_net(const ggml_tensor * node, std::string * why);
bool fits_lightning_indexer(const ggml_tensor * node, std::string * why);
bool fits_dsv4_hc_comb(const ggml_tensor * node, std::string * why);
bool fits_dsv4_hc_pre(const ggml_tensor * node, std::string * why);
bool fits_dsv4_hc_post(const ggml_tensor * node, std::string * why);

// Gradients, the loss, the optimizer steps (fits_backward.cpp).
bool fits_backward_same(const ggml_tensor * node, std::string * why); // SILU_BACK, RMS_NORM_BACK, SOFT_MAX_BACK
bool fits_get_rows_back(const ggml_tensor * node, std::string * why);
bool fits_im2col_back(const ggml_tensor * node, std::string * why);
bool fits_pool_2d_back(const ggml_tensor * node, std::string * why);
bool fits_flash_attn_back(const ggml_tensor * node, std::string * why);
bool fits_cross_entropy_loss(const ggml_tensor * node, std::string * why);
bool fits_cross_entropy_loss_back(const ggml_tensor * node, std::string * why);
bool fits_opt_step_adamw(const ggml_tensor * node, std::string * why);
bool fits_opt_step_sgd(const ggml_tensor * node, std::string * why);

// The program's own functions (fits.cpp, Note [Custom ops] in custom.h).
bool fits_map_custom(const ggml_tensor * node, std::string * why); // MAP_CUSTOM1..3
bool fits_custom(const ggml_tensor * node, std::string * why);

// Whether node is one its operator allows: its sources present as its row
// says (OpInfo::min_src, max_src), then the row's rule. true for NONE and
// the views; false for an op that is none. why as for OpFits.
bool node_fits(const ggml_tensor * node, std::string * why);

// Aborts with "func: " and the message when node breaks its operator's rule
// (Note [Shape rules]); the constructors' check of what they build.
void require_fits(const ggml_tensor * node, const char * func);

// A size a constructor computed, for a node it builds before require_fits
// judges it: a negative size (sources too small for the op) becomes 0, so
// that the node can be built and the rule names the problem.
inline int64_t size_or_zero(int64_t n) {
    return n < 0 ? 0 : n;
}

} // namespace loom
