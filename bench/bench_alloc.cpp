// Compute-buffer size and planning time of the graph allocator on
// transformer graphs (transformer_graph.h).
//
// For each graph: the bytes loom's plan needs (ggml_gallocr_reserve_n_size
// on the CPU buffer type), the lower bound for the graph's execution order
// (the peak of bytes live at once, each block rounded to the alignment),
// their ratio, and the planning time per node (best of --reps runs).
// With --ggml FILE, sizes and planning times measured by ggml's allocator
// on the same graphs ("name bytes us_per_node" per line, from a separate
// program built against ggml) are shown beside loom's.
//
// Usage: bench_alloc [--reps N] [--ggml FILE] [--only SUBSTRING]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "alloc/gallocr_inspect.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "transformer_graph.h"

namespace {

struct Reference {
    double bytes       = 0;
    double us_per_node = -1;
};

std::map<std::string, Reference> read_reference(const char * path) {
    std::map<std::string, Reference> out;
    FILE *                        f = std::fopen(path, "r");
    if (f == nullptr) {
        std::fprintf(stderr, "cannot open %s\n", path);
        std::exit(1);
    }
    char line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        char      name[128];
        Reference r;
        if (std::sscanf(line, "%127s %lf %lf", name, &r.bytes, &r.us_per_node) >= 2) {
            out[name] = r;
        }
    }
    std::fclose(f);
    return out;
}

double mib(double bytes) {
    return bytes / 1048576.0;
}

} // namespace

int main(int argc, char ** argv) {
    int          reps = 5;
    const char * ref  = nullptr;
    const char * only = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = std::max(1, std::atoi(argv[++i]));
        } else if (std::strcmp(argv[i], "--ggml") == 0 && i + 1 < argc) {
            ref = argv[++i];
        } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--reps N] [--ggml FILE] [--only SUBSTRING]\n", argv[0]);
            return 1;
        }
    }
    const std::map<std::string, Reference> ggml = ref ? read_reference(ref) : std::map<std::string, Reference>{};

    ggml_backend_buffer_type_t buft  = ggml_backend_cpu_buffer_type();
    ggml_backend_buffer_t      owner = ggml_backend_buft_alloc_buffer(buft, 64);

    std::printf("| graph | nodes | loom MiB | lower bound MiB | loom / bound | ggml MiB | ggml / bound | loom / ggml "
                "| loom µs/node | ggml µs/node | strategy |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    double worst_bound = 0, worst_ggml = 0;
    for (const bench_transformer & cfg : bench_transformer_configs) {
        if (only != nullptr && std::strstr(cfg.name, only) == nullptr) {
            continue;
        }
        const size_t     ctx_size = bench_transformer_ctx_size(&cfg);
        ggml_init_params p{ctx_size, nullptr, true};
        ggml_context *   wctx = ggml_init(p);
        ggml_context *   gctx = ggml_init(p);
        ggml_cgraph *    gf   = bench_transformer_build(&cfg, wctx, gctx, owner);
        const int        n    = ggml_graph_n_nodes(gf);

        ggml_gallocr_t galloc = ggml_gallocr_new(buft);
        size_t         bytes  = 0;
        double         best   = 1e300;
        for (int r = 0; r < reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            ggml_gallocr_reserve_n_size(galloc, gf, nullptr, nullptr, &bytes);
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            best            = std::min(best, us);
        }
        const loom::GallocrPlanStats st    = loom::gallocr_last_plan_stats(galloc, 0);
        const double                 ratio = double(bytes) / double(std::max<size_t>(st.lower_bound, 1));
        worst_bound                        = std::max(worst_bound, ratio);

        char ggml_col[4][32] = {"-", "-", "-", "-"};
        auto it              = ggml.find(cfg.name);
        if (it != ggml.end()) {
            const Reference & r = it->second;
            std::snprintf(ggml_col[0], sizeof(ggml_col[0]), "%.2f", mib(r.bytes));
            std::snprintf(ggml_col[1], sizeof(ggml_col[1]), "%.3f", r.bytes / double(st.lower_bound));
            std::snprintf(ggml_col[2], sizeof(ggml_col[2]), "%.3f", double(bytes) / r.bytes);
            if (r.us_per_node >= 0) {
                std::snprintf(ggml_col[3], sizeof(ggml_col[3]), "%.2f", r.us_per_node);
            }
            worst_ggml = std::max(worst_ggml, double(bytes) / r.bytes);
        }
        std::printf("| %s | %d | %.2f | %.2f | %.3f | %s | %s | %s | %.2f | %s | %s |\n", cfg.name, n,
                    mib(double(bytes)), mib(double(st.lower_bound)), ratio, ggml_col[0], ggml_col[1], ggml_col[2],
                    best / n, ggml_col[3], st.strategy);
        std::fflush(stdout);

        ggml_gallocr_free(galloc);
        ggml_free(gctx);
        ggml_free(wctx);
    }
    std::printf("\nworst loom / lower bound: %.3f\n", worst_bound);
    if (ref != nullptr) {
        std::printf("worst loom / ggml: %.3f\n", worst_ggml);
    }
    ggml_backend_buffer_free(owner);
    return 0;
}
