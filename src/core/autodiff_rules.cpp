// The gradient of each differentiable operator: given the gradient of a node,
// the contributions to its sources' gradients, built from forward operators.
// Which sources receive a gradient, and through which operators, follows
// ggml 0.25.1 so that graphs and results match.

#include <cstring>

#include "autodiff.h"
#include "common.h"

namespace loom::autodiff {

namespace {

constexpr size_t npos = TensorHashSet::npos;

int32_t param_i32(const ggml_tensor * t, int i) {
    int32_t v;
    std::memcpy(&v, reinterpret_cast<const char *>(t->op_params) + i * sizeof(int32_t), sizeof(v));
    return v;
}

float param_f32(const ggml_tensor * t, int i) {
    float v;
    std::memcpy(&v, reinterpret_cast<const char *>(t->op_params) + i * sizeof(float), sizeof(v));
    return v;
}

} // namespace

size_t Builder::slot_needing_grad(const ggml_tensor * t) const {
    if (t == nullptr) {
        return npos;
    }
    const size_t i = g_->visited_hash_set.find(t);
    if (i == npos || !g_->visited_hash_set.is_used(i) || !needed_[i]) {
        return npos;
    }
    return i;
}

void Builder::finish(size_t slot) {
    ggml_format_name(g_->grads[slot], "grad for %s", g_->visited_hash_set.keys[slot]->name);
    ggml_build_forward_expand(g_, g_->grads[slot]);
}

void Builder::add(size_t slot, ggml_tensor * d) {
    ggml_tensor *& grad = g_->grads[slot];
    if (grad == nullptr) {
        grad = d;
    } else {
        grad = g_->grad_accs[slot] != nullptr ? ggml_add_inplace(ctx_, grad, d) : ggml_add(ctx_, grad, d);
    }
    finish(slot);
}

void Builder::sub(size_t slot, ggml_tensor * d) {
    ggml_tensor *& grad = g_->grads[slot];
    if (grad == nullptr) {
        grad = ggml_neg(ctx_, d);
    } else {
        grad = g_->grad_accs[slot] != nullptr ? ggml_sub_inplace(ctx_, grad, d) : ggml_sub(ctx_, grad, d);
    }
    finish(slot);
}

void Builder::add1(size_t slot, ggml_tensor * d) {
    ggml_tensor *& grad = g_->grads[slot];
    if (grad == nullptr) {
        grad = ggml_repeat(ctx_, d, const_cast<ggml_tensor *>(g_->visited_hash_set.keys[slot]));
    } else {
        grad = g_->grad_accs[slot] != nullptr ? ggml_add1_inplace(ctx_, grad, d) : ggml_add1(ctx_, grad, d);
    }
    finish(slot);
}

void Builder::acc(size_t slot, ggml_tensor * d, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    ggml_tensor *& grad = g_->grads[slot];
    if (grad == nullptr) {
        // A zero tensor of the source's shape: the source scaled by 0 (as
        // ggml does; a source holding inf or NaN gives NaN here).
        ggml_tensor * zero = ggml_scale(ctx_, const_cast<ggml_tensor *>(g_->visited_hash_set.keys[slot]), 0.0f);
        grad               = ggml_acc(ctx_, zero, d, nb1, nb2, nb3, offset);
    } else {
        grad = g_->grad_accs[slot] != nullptr ? ggml_acc_inplace(ctx_, grad, d, nb1, nb2, nb3, offset)
                                              : ggml_acc(ctx_, grad, d, nb1, nb2, nb3, offset);
    }
    finish(slot);
}

void Builder::unary(ggml_tensor * t, ggml_tensor * grad, size_t s0) {
    ggml_tensor * src0 = t->src[0];
    const ggml_unary_op uop = ggml_get_unary_op(t);
    const UnaryInfo *   ui  = unary_info(uop);
    LOOM_REQUIRE(ui != nullptr && (ui->flags & k_op_grad) != 0,
                 "ggml_build_backward_expand: no gradient for unary op %s (node %s)", ggml_unary_op_name(uop),
                 describe(t).text);
    switch (uop) {
        case GGML_UNARY_OP_SGN:
        case GGML_UNARY_OP_STEP: break; // piecewise constant
        case GGML_UNARY_OP_ABS:
            if (s0 != npos) add(s0, ggml_mul(ctx_, ggml_sgn(ctx_, src0), grad));
            break;
        case GGML_UNARY_OP_NEG:
            if (s0 != npos) sub(s0, grad);
            break;
        case GGML_UNARY_OP_RELU:
            if (s0 != npos) add(s0, ggml_mul(ctx_, ggml_step(ctx_, src0), grad));
            break;
        case GGML_UNARY_OP_EXP:
            if (s0 != npos) add(s0, ggml_mul(ctx_, t, grad));
            break;
        case GGML_UNARY_OP_EXPM1:
            if (s0 != npos) add(s0, ggml_mul(ctx_, grad, ggml_exp(ctx_, src0)));
            break;
        case GGML_UNARY_OP_SOFTPLUS:
            if (s0 != npos) add(s0, ggml_mul(ctx_, grad, ggml_sigmoid(ctx_, src0)));
            break;
        case GGML_UNARY_OP_SILU:
            if (s0 != npos) add(s0, ggml_silu_back(ctx_, grad, src0));
            break;
        // No gradient (k_unary_ops): refused above.
        case GGML_UNARY_OP_TANH:
        case GGML_UNARY_OP_ELU:
        case GGML_UNARY_OP_SIGMOID:
        case GGML_UNARY_OP_GELU:
        case GGML_UNARY_OP_GELU_QUICK:
        case GGML_UNARY_OP_HARDSWISH:
        case GGML_UNARY_OP_HARDSIGMOID:
        case GGML_UNARY_OP_GELU_ERF:
        case GGML_UNARY_OP_XIELU:
        case GGML_UNARY_OP_FLOOR:
        case GGML_UNARY_OP_CEIL:
        case GGML_UNARY_OP_ROUND:
        case GGML_UNARY_OP_TRUNC:
        case GGML_UNARY_OP_COUNT: LOOM_ASSERT(false && "a unary op without a gradient"); break;
    }
}

void Builder::backward(int i_node) {
    ggml_tensor * t    = g_->nodes[i_node];
    ggml_tensor * grad = ggml_graph_get_grad(g_, t);
    if (grad == nullptr) {
        return;
    }
    ggml_tensor * src0 = t->src[0];
    ggml_tensor * src1 = t->src[1];
    ggml_tensor * src2 = t->src[2];
    const size_t  s0   = slot_needing_grad(src0);
    const size_t  s1   = slot_needing_grad(src1);
    const size_t  s2   = slot_needing_grad(src2);

    switch (t->op) {
        case GGML_OP_NONE: break;
        case GGML_OP_DUP:
            if (s0 != npos) add(s0, grad);
            break;
        case GGML_OP_ADD:
            if (s0 != npos) add(s0, grad);
            if (s1 != npos) add(s1, ggml_are_same_shape(src0, src1) ? grad : ggml_repeat_back(ctx_, grad, src1));
            break;
        case GGML_OP_ADD1:
            if (s0 != npos) add(s0, grad);
            // d/db of a + b (b broadcast to every element) is the sum of the
            // gradient; ggml 0.25.1 takes the mean here, which is neither the
            // derivative nor a scalar for a matrix a.
            if (s1 != npos) add(s1, ggml_sum(ctx_, grad));
            break;
        case GGML_OP_ACC:
            if (s0 != npos) add(s0, grad);
            if (s1 != npos) {
                ggml_tensor * v = ggml_view_4d(ctx_, grad, src1->ne[0], src1->ne[1], src1->ne[2], src1->ne[3],
                                               size_t(param_i32(t, 0)), size_t(param_i32(t, 1)),
                                               size_t(param_i32(t, 2)), size_t(param_i32(t, 3)));
                add(s1, ggml_reshape(ctx_, ggml_cont(ctx_, v), src1));
            }
            break;
        case GGML_OP_SUB:
            if (s0 != npos) add(s0, grad);
            if (s1 != npos) sub(s1, grad);
            break;
        case GGML_OP_MUL:
            if (s0 != npos) add(s0, ggml_mul(ctx_, grad, src1));
            if (s1 != npos) {
                ggml_tensor * d = ggml_mul(ctx_, src0, grad);
                add(s1, ggml_are_same_shape(src0, src1) ? d : ggml_repeat_back(ctx_, d, src1));
            }
            break;
        case GGML_OP_DIV:
            if (s0 != npos) add(s0, ggml_div(ctx_, grad, src1));
            if (s1 != npos) sub(s1, ggml_mul(ctx_, grad, ggml_div(ctx_, t, src1)));
            break;
        case GGML_OP_SQR:
            if (s0 != npos) add(s0, ggml_scale(ctx_, ggml_mul(ctx_, src0, grad), 2.0f));
            break;
        case GGML_OP_SQRT:
            if (s0 != npos) add(s0, ggml_scale(ctx_, ggml_div(ctx_, grad, t), 0.5f));
            break;
        case GGML_OP_LOG:
            if (s0 != npos) add(s0, ggml_div(ctx_, grad, src0));
            break;
        case GGML_OP_SIN:
            if (s0 != npos) add(s0, ggml_mul(ctx_, grad, ggml_cos(ctx_, src0)));
            break;
        case GGML_OP_COS:
            if (s0 != npos) sub(s0, ggml_mul(ctx_, grad, ggml_sin(ctx_, src0)));
            break;
        case GGML_OP_SUM:
            if (s0 != npos) add1(s0, grad);
            break;
        case GGML_OP_SUM_ROWS:
            if (s0 != npos) add(s0, ggml_repeat(ctx_, grad, src0));
            break;
        case GGML_OP_MEAN:
            // Each row's mean spreads its gradient evenly over the row.
            if (s0 != npos) add(s0, ggml_repeat(ctx_, ggml_scale(ctx_, grad, 1.0f / float(src0->ne[0])), src0));
            break;
        case GGML_OP_REPEAT:
            if (s0 != npos) add(s0, ggml_repeat_back(ctx_, grad, src0));
            break;
        case GGML_OP_REPEAT_BACK:
            if (s0 != npos) add(s0, ggml_repeat(ctx_, grad, src0));
            break;
        case GGML_OP_MUL_MAT: {
            // t[m,p] = src0[n,m]^T src1[n,p]: d src0 = src1 grad^T, d src1 = src0 grad.
            if (s0 != npos) {
                LOOM_REQUIRE(grad->ne[2] == src1->ne[2] && grad->ne[3] == src1->ne[3],
                             "ggml_build_backward_expand: mul_mat %s: gradient batch does not match src1",
                             describe(t).text);
                ggml_tensor * d = ggml_out_prod(ctx_, src1, grad);
                if (!ggml_are_same_shape(d, src0)) {
                    // src0 was broadcast over dims 2 (and 3): sum the groups of
                    // products that used the same matrix of src0.
                    LOOM_REQUIRE(d->ne[0] == src0->ne[0] && d->ne[1] == src0->ne[1] && d->ne[3] == 1,
                                 "ggml_build_backward_expand: mul_mat %s: gradient of a src0 broadcast over "
                                 "dim 3 is not supported",
                                 describe(t).text);
                    const int64_t groups = d->ne[2] / src0->ne[2];
                    d = ggml_view_4d(ctx_, d, src0->ne[0], src0->ne[1], src0->ne[2], groups, d->nb[1],
                                     d->nb[2] * size_t(groups), d->nb[2], 0);
                    d = ggml_repeat_back(ctx_, d, src0);
                }
                add(s0, d);
            }
            if (s1 != npos) add(s1, ggml_out_prod(ctx_, src0, ggml_transpose(ctx_, grad)));
        } break;
        case GGML_OP_SCALE:
            if (s0 != npos) add(s0, ggml_scale(ctx_, grad, param_f32(t, 0)));
            break;
        case GGML_OP_SET: {
            const size_t nb1 = size_t(param_i32(t, 0)), nb2 = size_t(param_i32(t, 1)), nb3 = size_t(param_i32(t, 2));
            const size_t offset = size_t(param_i32(t, 3));
            if (s0 == npos && s1 == npos) break;
            LOOM_REQUIRE(src0->type == t->type, "ggml_build_backward_expand: set %s changes the type",
                         describe(t).text);
            ggml_tensor * v = ggml_view_4d(ctx_, grad, src1->ne[0], src1->ne[1], src1->ne[2], src1->ne[3], nb1,
                                           nb2, nb3, offset);
            if (s0 != npos) add(s0, ggml_acc(ctx_, grad, ggml_neg(ctx_, v), nb1, nb2, nb3, offset));
            if (s1 != npos) add(s1, ggml_reshape(ctx_, ggml_cont(ctx_, v), src1));
        } break;
        case GGML_OP_CPY:
            // The destination's old values do not reach the result: no gradient for src1.
            if (s0 != npos) add(s0, ggml_reshape(ctx_, grad, src0));
            break;
        case GGML_OP_CONT:
            if (s0 != npos) add(s0, ggml_are_same_shape(t, src0) ? grad : ggml_reshape(ctx_, grad, src0));
            break;
        case GGML_OP_RESHAPE:
            if (s0 != npos) {
                ggml_tensor * c = ggml_is_contiguous(grad) ? grad : ggml_cont(ctx_, grad);
                add(s0, ggml_reshape(ctx_, c, src0));
            }
            break;
        case GGML_OP_VIEW:
            if (s0 != npos) {
                size_t offset;
                std::memcpy(&offset, t->op_params, sizeof(offset));
                size_t nb1 = t->nb[1], nb2 = t->nb[2], nb3 = t->nb[3];
                const ggml_tensor * acc_grad = g_->grads[s0];
                if (acc_grad != nullptr && acc_grad->type != src0->type) {
                    // The strides of the view are in src0's element size; the
                    // gradient's elements may be wider.
                    const size_t ng = ggml_element_size(acc_grad), n0 = ggml_element_size(src0);
                    LOOM_REQUIRE(offset % n0 == 0 && nb1 % n0 == 0 && nb2 % n0 == 0 && nb3 % n0 == 0,
                                 "ggml_build_backward_expand: view %s is not element-aligned", describe(t).text);
                    offset = offset / n0 * ng;
                    nb1    = nb1 / n0 * ng;
                    nb2    = nb2 / n0 * ng;
                    nb3    = nb3 / n0 * ng;
                }
                acc(s0, grad, nb1, nb2, nb3, offset);
            }
            break;
        case GGML_OP_PERMUTE:
            if (s0 != npos) {
                int back[4] = {0, 0, 0, 0};
                for (int i = 0; i < 4; ++i) back[param_i32(t, i) & 3] = i;
                add(s0, ggml_permute(ctx_, grad, back[0], back[1], back[2], back[3]));
            }
            break;
        case GGML_OP_TRANSPOSE:
            if (s0 != npos) add(s0, ggml_transpose(ctx_, grad));
            break;
        case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_DIAG_MASK_ZERO:
            if (s0 != npos) add(s0, ggml_diag_mask_zero(ctx_, grad, param_i32(t, 0)));
            break;
        case GGML_OP_UNARY: unary(t, grad, s0); break;
        case GGML_OP_ADD_ID: case GGML_OP_CUMSUM: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_CONCAT:
        case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM: case GGML_OP_RMS_NORM_BACK:
        case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD:
        case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE: case GGML_OP_ROPE_BACK:
        case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK:
        case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D: case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D: case GGML_OP_POOL_2D:
        case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D:
        case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT: train_op(t, grad, s0, s1, s2); break;
    }

    LOOM_REQUIRE(s0 == npos || g_->grads[s0] == nullptr || ggml_are_same_shape(src0, g_->grads[s0]),
                 "ggml_build_backward_expand: gradient of %s has the wrong shape", describe(src0).text);
    LOOM_REQUIRE(s1 == npos || g_->grads[s1] == nullptr || ggml_are_same_shape(src1, g_->grads[s1]),
                 "ggml_build_backward_expand: gradient of %s has the wrong shape", describe(src1).text);
    LOOM_REQUIRE(s2 == npos || g_->grads[s2] == nullptr || ggml_are_same_shape(src2, g_->grads[s2]),
                 "ggml_build_backward_expand: gradient of %s has the wrong shape", describe(src2).text);
}

void Builder::train_op(ggml_tensor * t, ggml_tensor * grad, size_t s0, size_t s1, size_t s2) {
    ggml_tensor * src0 = t->src[0];
    ggml_tensor * src1 = t->src[1];
    ggml_tensor * src2 = t->src[2];
    switch (t->op) {
        case GGML_OP_RMS_NORM:
            if (s0 != npos) add(s0, ggml_rms_norm_back(ctx_, grad, src0, param_f32(t, 0)));
            break;
        case GGML_OP_GET_ROWS:
            // The indices (src1) carry no gradient.
            if (s0 != npos) add(s0, ggml_get_rows_back(ctx_, grad, src1, src0));
            break;
        case GGML_OP_SOFT_MAX:
            LOOM_REQUIRE(s1 == npos, "ggml_build_backward_expand: no gradient for the mask of soft_max %s",
                         describe(t).text);
            if (s0 != npos) add(s0, ggml_soft_max_ext_back(ctx_, grad, t, param_f32(t, 0), param_f32(t, 1)));
            break;
        case GGML_OP_ROPE: {
            LOOM_REQUIRE(s2 == npos, "ggml_build_backward_expand: no gradient for the frequency factors of rope %s",
                         describe(t).text);
            if (s0 == npos) break;
            // op_params: n_past, n_dims, mode, n_ctx, n_ctx_orig, then floats
            // freq_base, freq_scale, ext_factor, attn_factor, beta_fast,
            // beta_slow, then the four sections.
            const int n_dims = param_i32(t, 1), mode = param_i32(t, 2), n_ctx_orig = param_i32(t, 4);
            const float fb = param_f32(t, 5), fs = param_f32(t, 6), ef = param_f32(t, 7), af = param_f32(t, 8);
            const float bf = param_f32(t, 9), bs = param_f32(t, 10);
            int         sections[4] = {param_i32(t, 11), param_i32(t, 12), param_i32(t, 13), param_i32(t, 14)};
            // One position per row: plain rope; four per row: multi-section.
            ggml_tensor * d = grad->ne[2] == src1->ne[0]
                                  ? ggml_rope_ext_back(ctx_, grad, src1, src2, n_dims, mode, n_ctx_orig, fb, fs, ef,
                                                       af, bf, bs)
                                  : ggml_rope_multi_back(ctx_, grad, src1, src2, n_dims, sections, mode, n_ctx_orig,
                                                         fb, fs, ef, af, bf, bs);
            add(s0, d);
        } break;
        case GGML_OP_IM2COL:
            // src0 (the kernel) gives only the shape.
            if (s1 != npos) {
                add(s1, ggml_im2col_back(ctx_, grad, src0, src1->ne, param_i32(t, 0), param_i32(t, 1),
                                         param_i32(t, 2), param_i32(t, 3), param_i32(t, 4), param_i32(t, 5),
                                         param_i32(t, 6) == 1));
            }
            break;
        case GGML_OP_POOL_2D:
            if (s0 != npos) {
                add(s0, ggml_pool_2d_back(ctx_, grad, src0, ggml_op_pool(param_i32(t, 0)), param_i32(t, 1),
                                          param_i32(t, 2), param_i32(t, 3), param_i32(t, 4), float(param_i32(t, 5)),
                                          float(param_i32(t, 6))));
            }
            break;
        case GGML_OP_CROSS_ENTROPY_LOSS:
            LOOM_REQUIRE(s1 == npos, "ggml_build_backward_expand: no gradient for the labels of %s",
                         describe(t).text);
            if (s0 != npos) add(s0, ggml_cross_entropy_loss_back(ctx_, grad, src0, src1));
            break;
        case GGML_OP_GLU: {
            const ggml_glu_op gop = ggml_get_glu_op(t);
            LOOM_REQUIRE(gop == GGML_GLU_OP_SWIGLU, "ggml_build_backward_expand: no gradient for glu op %s (node %s)",
                         ggml_glu_op_name(gop), describe(t).text);
            LOOM_REQUIRE(src1 != nullptr || (s0 == npos && s1 == npos),
                         "ggml_build_backward_expand: only the split swiglu (two sources) has a gradient (%s)",
                         describe(t).text);
            if (s0 != npos) add(s0, ggml_silu_back(ctx_, ggml_mul(ctx_, grad, src1), src0));
            if (s1 != npos) add(s1, ggml_mul(ctx_, ggml_silu(ctx_, src0), grad));
        } break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM_BACK:
        case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT: case GGML_OP_MUL_MAT_ID:
        case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY: case GGML_OP_CONT:
        case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP:
        case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN:
        case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS:
        case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI:
        case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB:
        case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
        case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_COUNT:
            LOOM_REQUIRE(false, "ggml_build_backward_expand: no gradient for %s (node %s)", ggml_op_name(t->op),
                         describe(t).text);
    }
}

} // namespace loom::autodiff
