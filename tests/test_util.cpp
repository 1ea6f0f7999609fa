#include "test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace loomtest {

std::map<std::string, std::vector<double>> read_named_values(const std::string & path, std::string * why) {
    std::ifstream file(path);
    if (!file.good()) {
        *why = "cannot read " + path;
        return {};
    }
    std::map<std::string, std::vector<double>> out;
    for (std::string line; std::getline(file, line);) {
        std::istringstream in(line);
        std::string        name;
        size_t             n = 0;
        in >> name >> n;
        std::vector<double> v(n);
        for (double & x : v) {
            in >> x;
        }
        if (in.fail()) {
            *why = "malformed line for " + name + " in " + path;
            return {};
        }
        out[name] = std::move(v);
    }
    return out;
}

Context::Context(size_t mem_size) {
    ggml_init_params params{};
    params.mem_size   = mem_size;
    params.mem_buffer = nullptr;
    params.no_alloc   = false;
    ctx_              = ggml_init(params);
    if (ctx_ == nullptr) {
        throw std::runtime_error("ggml_init failed");
    }
}

Context::~Context() {
    ggml_free(ctx_);
}

std::string describe(const RunMode & m) {
    std::ostringstream s;
    s << m.n_threads << " thread(s)" << (m.use_ref ? ", portable kernels" : "");
    return s.str();
}

const std::vector<RunMode> & run_modes() {
    static const std::vector<RunMode> modes = {{1, false}, {3, false}, {2, true}};
    return modes;
}

ggml_status compute(ggml_context * ctx, std::initializer_list<ggml_tensor *> outs, const RunMode & mode) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    for (ggml_tensor * t : outs) {
        ggml_build_forward_expand(gf, t);
    }
    if (!mode.use_ref) {
        return ggml_graph_compute_with_ctx(ctx, gf, mode.n_threads);
    }
    ggml_cplan plan = ggml_graph_plan(gf, mode.n_threads, nullptr);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.empty() ? nullptr : work.data();
    plan.use_ref   = true;
    return ggml_graph_compute(gf, &plan);
}

ggml_status compute(ggml_context * ctx, ggml_tensor * out, const RunMode & mode) {
    return compute(ctx, {out}, mode);
}

ggml_status compute(ggml_context * ctx, ggml_tensor * out, int n_threads) {
    return compute(ctx, {out}, RunMode{n_threads, false});
}

::testing::AssertionResult matches(const Array & got, const Array & want, double max_nmse, double max_abs) {
    if (got.ne != want.ne) {
        return ::testing::AssertionFailure() << "shape " << shape_str(got.ne) << ", expected " << shape_str(want.ne);
    }
    if (const int64_t i = first_nonfinite_mismatch(got.v, want.v); i >= 0) {
        return ::testing::AssertionFailure() << "element " << i << " is " << got.v[size_t(i)] << ", expected "
                                             << want.v[size_t(i)];
    }
    // Where the largest difference is, for the message.
    int64_t worst = -1;
    for (size_t i = 0; i < want.v.size(); ++i) {
        if (std::isfinite(want.v[i]) &&
            (worst < 0 || std::fabs(got.v[i] - want.v[i]) > std::fabs(got.v[size_t(worst)] - want.v[size_t(worst)]))) {
            worst = int64_t(i);
        }
    }
    const double worst_d = max_abs_diff(got, want);
    const double e       = nmse(got, want);
    const bool   ok_nmse = e <= max_nmse;
    const bool   ok_abs  = max_abs < 0.0 || worst_d <= max_abs;
    std::ostringstream detail;
    detail << "nmse " << e << " (limit " << max_nmse << "), max abs diff " << worst_d;
    if (max_abs >= 0.0) {
        detail << " (limit " << max_abs << ")";
    }
    if (worst >= 0) {
        const Shape & ne = want.ne;
        const int64_t i  = worst;
        detail << " at [" << i % ne[0] << ", " << (i / ne[0]) % ne[1] << ", " << (i / (ne[0] * ne[1])) % ne[2]
               << ", " << i / (ne[0] * ne[1] * ne[2]) << "]: got " << got.v[size_t(i)] << ", expected "
               << want.v[size_t(i)];
    }
    detail << ", shape " << shape_str(want.ne);
    if (ok_nmse && ok_abs) {
        return ::testing::AssertionSuccess() << detail.str();
    }
    return ::testing::AssertionFailure() << detail.str();
}

::testing::AssertionResult matches(const ggml_tensor * got, const Array & want, double max_nmse, double max_abs) {
    auto r = matches(read_tensor(got), want, max_nmse, max_abs);
    if (!r) {
        return ::testing::AssertionFailure() << ggml_op_desc(got) << " " << ggml_type_name(got->type) << ": "
                                             << r.message();
    }
    return r;
}

bool verbose() {
    static const bool v = std::getenv("LOOMTEST_VERBOSE") != nullptr;
    return v;
}

void check_modes(ggml_context * ctx, ggml_tensor * out, const Array & want, double max_nmse, double max_abs) {
    for (const RunMode & mode : run_modes()) {
        SCOPED_TRACE(describe(mode));
        if (out->view_src == nullptr) {
            std::memset(out->data, 0xff, ggml_nbytes(out));
        }
        const ggml_status st = compute(ctx, out, mode);
        ASSERT_EQ(st, GGML_STATUS_SUCCESS) << ggml_op_desc(out) << " " << ggml_type_name(out->type)
                                           << " did not compute (" << ggml_status_to_string(st) << ")";
        const ::testing::AssertionResult r = matches(out, want, max_nmse, max_abs);
        EXPECT_TRUE(r);
        if (verbose()) {
            std::printf("  %s %s [%s]: %s\n", ggml_op_desc(out), ggml_type_name(out->type), describe(mode).c_str(),
                        r.message());
        }
    }
}

int64_t rand_int(std::mt19937 & rng, int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

int64_t odd_size(std::mt19937 & rng, int64_t lo, int64_t hi) {
    int64_t n = rand_int(rng, lo, hi);
    if (n % 2 == 0) {
        n = n + 1 <= hi ? n + 1 : n - 1;
    }
    return n;
}

const std::vector<unsigned> & seeds() {
    static const std::vector<unsigned> s = {1u, 42u, 20240607u};
    return s;
}

} // namespace loomtest
