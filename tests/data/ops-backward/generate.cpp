// Records ggml's results for the graphs of tests/backward_ggml_cases.h: one
// line per case, "name count v0 v1 ...". Built against ggml 0.25.1 (see README.md).

#include <cstdio>

#include "../../backward_ggml_cases.h"
#include "ggml-cpu.h"

int main() {
    for (const backward_ggml_cases::Case & c : backward_ggml_cases::cases()) {
        ggml_init_params params{};
        params.mem_size    = size_t(16) << 20;
        ggml_context * ctx = ggml_init(params);
        ggml_tensor *  out = c.build(ctx);
        ggml_cgraph *  gf  = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        if (ggml_graph_compute_with_ctx(ctx, gf, 2) != GGML_STATUS_SUCCESS || !ggml_is_contiguous(out)) {
            std::fprintf(stderr, "%s failed\n", c.name);
            return 1;
        }
        const std::vector<float> v = backward_ggml_cases::values(out);
        std::printf("%s %zu", c.name, v.size());
        for (float x : v) {
            std::printf(" %.9g", double(x));
        }
        std::printf("\n");
        ggml_free(ctx);
    }
    return 0;
}
