/* A C program written against ggml's headers: builds y = relu(a*x + b) and
 * computes it on the CPU backend. Exits 0 when the result is right. */
#include <math.h>
#include <stdio.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

int main(void) {
    struct ggml_init_params params = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true};
    struct ggml_context *   ctx    = ggml_init(params);
    struct ggml_tensor *    a      = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
    struct ggml_tensor *    x      = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3);
    struct ggml_tensor *    b      = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2);
    struct ggml_tensor *    y      = ggml_relu(ctx, ggml_add(ctx, ggml_mul_mat(ctx, a, x), b));
    struct ggml_cgraph *    gf     = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);

    ggml_backend_t        backend = ggml_backend_cpu_init();
    ggml_backend_buffer_t buf     = ggml_backend_alloc_ctx_tensors(ctx, backend);
    const float           av[6]   = {1, 2, 3, -1, -2, -3};
    const float           xv[3]   = {1, 1, 1};
    const float           bv[2]   = {0.5f, 1.0f};
    ggml_backend_tensor_set(a, av, 0, sizeof(av));
    ggml_backend_tensor_set(x, xv, 0, sizeof(xv));
    ggml_backend_tensor_set(b, bv, 0, sizeof(bv));
    if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) {
        return 1;
    }
    float yv[2];
    ggml_backend_tensor_get(y, yv, 0, sizeof(yv));
    printf("y = [%g, %g]\n", yv[0], yv[1]);
    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
    ggml_free(ctx);
    return fabsf(yv[0] - 6.5f) < 1e-6f && yv[1] == 0.0f ? 0 : 1;
}
