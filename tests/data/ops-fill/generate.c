// Writes reference.txt: the results of ggml's CPU backend for the fill,
// shape and element-wise cases of tests/test_ops_fill.cpp (GgmlReference).
// Inputs come from the formula input_value(i) shared with the test. Build
// against a ggml build (see README.md) and run with the output path.

#include <math.h>
#include <stdio.h>

#include "ggml-cpu.h"
#include "ggml.h"

static float input_value(int i) {
    return 2.0f * sinf(0.37f * (float) i + 0.1f);
}

static struct ggml_tensor * input(struct ggml_context * ctx, int64_t ne0, int64_t ne1, int64_t ne2) {
    struct ggml_tensor * t = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne0, ne1, ne2);
    float *              d = (float *) t->data;
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        d[i] = input_value((int) i);
    }
    return t;
}

static void emit(FILE * out, struct ggml_context * ctx, const char * name, struct ggml_tensor * r) {
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, r);
    ggml_graph_compute_with_ctx(ctx, g, 1);
    fprintf(out, "%s %lld", name, (long long) ggml_nelements(r));
    for (int64_t i = 0; i < ggml_nelements(r); ++i) {
        fprintf(out, " %.9g", ((const float *) r->data)[i]);
    }
    fprintf(out, "\n");
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s reference.txt\n", argv[0]);
        return 1;
    }
    FILE * out = fopen(argv[1], "w");
    if (out == NULL) {
        return 1;
    }
    struct ggml_init_params ip = {64 << 20, NULL, false};
    struct ggml_context *   ctx = ggml_init(ip);

    emit(out, ctx, "arange", ggml_arange(ctx, -3.0f, 7.5f, 0.7f));
    struct ggml_tensor * ts = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6);
    const float          tv[6] = {0.0f, 1.0f, 2.5f, 10.0f, 99.5f, 500.0f};
    for (int i = 0; i < 6; ++i) {
        ((float *) ts->data)[i] = tv[i];
    }
    emit(out, ctx, "timestep_embedding_16", ggml_timestep_embedding(ctx, ts, 16, 10000));
    emit(out, ctx, "timestep_embedding_15", ggml_timestep_embedding(ctx, ts, 15, 100));
    emit(out, ctx, "pad_reflect_1d", ggml_pad_reflect_1d(ctx, input(ctx, 7, 3, 1), 2, 4));
    emit(out, ctx, "roll", ggml_roll(ctx, input(ctx, 5, 4, 3), 2, -1, 1, 0));
    emit(out, ctx, "pad_ext_circular", ggml_pad_ext_circular(ctx, input(ctx, 4, 3, 1), 1, 2, 2, 1, 0, 0, 0, 0));
    emit(out, ctx, "pad_ext", ggml_pad_ext(ctx, input(ctx, 4, 3, 2), 1, 2, 0, 1, 1, 0, 0, 0));
    emit(out, ctx, "cumsum", ggml_cumsum(ctx, input(ctx, 9, 3, 1)));
    emit(out, ctx, "l2_norm", ggml_l2_norm(ctx, input(ctx, 10, 3, 1), 1e-6f));
    emit(out, ctx, "tri_lower_diag", ggml_tri(ctx, input(ctx, 5, 5, 1), GGML_TRI_TYPE_LOWER_DIAG));
    emit(out, ctx, "leaky_relu", ggml_leaky_relu(ctx, input(ctx, 12, 1, 1), 0.2f, false));
    emit(out, ctx, "clamp", ggml_clamp(ctx, input(ctx, 12, 1, 1), -0.5f, 0.7f));
    emit(out, ctx, "repeat_back", ggml_repeat_back(ctx, input(ctx, 6, 4, 1), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)));
    emit(out, ctx, "acc", ggml_acc(ctx, input(ctx, 6, 4, 1), input(ctx, 2, 2, 1), 24, 96, 96, 4));
    emit(out, ctx, "diag_mask_zero", ggml_diag_mask_zero(ctx, input(ctx, 6, 4, 2), 1));

    ggml_free(ctx);
    return fclose(out) == 0 ? 0 : 1;
}
