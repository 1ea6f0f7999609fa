// Writes expected.txt: the results of the cases of cases.h computed by
// ggml 0.25.1's CPU backend (see README.md for the build command).

#include <cstdio>

#include "cases.h"
#include "ggml-cpu.h"

int main() {
    for (int i = 0; i < refcases::kCount; ++i) {
        ggml_init_params params = {size_t(16) << 20, nullptr, false};
        ggml_context *   ctx    = ggml_init(params);
        ggml_tensor *    out    = refcases::build(ctx, i);
        ggml_cgraph *    gf     = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        if (ggml_graph_compute_with_ctx(ctx, gf, 1) != GGML_STATUS_SUCCESS) {
            std::fprintf(stderr, "%s failed\n", refcases::name(i));
            return 1;
        }
        const int64_t n = ggml_nelements(out);
        std::printf("%s %lld\n", refcases::name(i), (long long) n);
        for (int64_t j = 0; j < n; ++j) std::printf("%.9g\n", double(static_cast<const float *>(out->data)[j]));
        ggml_free(ctx);
    }
    return 0;
}
