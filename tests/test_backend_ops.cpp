// Conformance suite: every op case of backend_ops_cases.cpp on every device
// in the registry, compared with the CPU node by node through
// ggml_backend_compare_graph_backend.
//
// The devices are whatever the registry holds after ggml_backend_load_all
// plus the test device plugin, so a backend added later (built in, or found
// as a plugin) is checked by this file without new test code. A case a
// device does not support is reported as skipped, with the op and types.
//
// TestDev1 is restricted to a subset of ops so that every run also goes
// through the skipping path; TestDev0 computes every op the CPU computes.
// Only some devices are independent implementations (Note [What the suite
// compares]); a summary at the end counts the cases of each kind.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend_ops_cases.h"
#include "backend_test_helpers.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "reference.h"
#include "test_util.h"

using namespace loomtest;
using namespace loomtest::ops;

namespace {

constexpr const char * kRestrictedDevice = "TestDev1";
constexpr const char * kRestrictedOps    = "ADD,SUB,MUL,DIV,MUL_MAT,CPY,CONT,DUP,UNARY,SOFT_MAX,GET_ROWS";

// The devices under test, by name: loaded and configured once per process.
const std::vector<std::string> & device_names() {
    static const std::vector<std::string> names = [] {
        ggml_backend_load_all();
        if (ggml_backend_reg_t reg = testdev_reg(); reg == nullptr) {
            std::fprintf(stderr, "test_backend_ops: the test device plugin %s did not load\n", LOOM_TESTDEV_PATH);
        }
        if (ggml_backend_dev_t dev = ggml_backend_dev_by_name(kRestrictedDevice)) {
            testdev_configure(dev, "ops", kRestrictedOps);
        }
        std::vector<std::string> out;
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
            out.emplace_back(ggml_backend_dev_name(ggml_backend_dev_get(i)));
        }
        return out;
    }();
    return names;
}

struct Param {
    std::string device;
    size_t      case_index;
};

// How gtest prints a parameter in failure messages.
void PrintTo(const Param & p, std::ostream * os) {
    *os << p.device << " / " << all_cases()[p.case_index].name;
}

std::vector<Param> all_params() {
    std::vector<Param> out;
    for (const std::string & dev : device_names()) {
        for (size_t i = 0; i < all_cases().size(); ++i) {
            out.push_back({dev, i});
        }
    }
    return out;
}

std::string param_name(const ::testing::TestParamInfo<Param> & info) {
    std::string name = info.param.device + "_" + all_cases()[info.param.case_index].name;
    for (char & ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') {
            ch = '_';
        }
    }
    return name;
}

bool is_view_op(ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

// "MUL_MAT(q4_0 [96,13,1,1], f32 [96,7,1,1]) -> f32" for skip and failure messages.
std::string describe_node(const ggml_tensor * t) {
    std::ostringstream s;
    s << ggml_op_desc(t) << "(";
    bool first = true;
    for (const ggml_tensor * src : t->src) {
        if (src == nullptr) {
            continue;
        }
        s << (first ? "" : ", ") << ggml_type_name(src->type) << " [" << src->ne[0] << "," << src->ne[1] << ","
          << src->ne[2] << "," << src->ne[3] << "]";
        first = false;
    }
    s << ") -> " << ggml_type_name(t->type);
    return s.str();
}

// ---- filling inputs --------------------------------------------------------

// Values for an input, as floats in ggml's element order.
std::vector<float> input_values(const ggml_tensor * t, const Init & init, std::mt19937 & rng) {
    const size_t       n = size_t(ggml_nelements(t));
    const int64_t      ne0 = t->ne[0];
    std::vector<float> v(n);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    switch (init.kind) {
        case Init::uniform: {
            std::uniform_real_distribution<double> dist(init.lo, init.hi);
            for (float & x : v) {
                x = float(dist(rng));
            }
            break;
        }
        case Init::integers: {
            std::uniform_int_distribution<int64_t> dist(int64_t(init.lo), int64_t(init.hi));
            for (float & x : v) {
                x = float(dist(rng));
            }
            break;
        }
        case Init::distinct_indices: {
            std::vector<int64_t> pool(size_t(init.hi) + 1);
            for (size_t row = 0; row < n / size_t(ne0); ++row) {
                std::iota(pool.begin(), pool.end(), int64_t(0));
                std::shuffle(pool.begin(), pool.end(), rng);
                for (int64_t i = 0; i < ne0; ++i) {
                    v[row * size_t(ne0) + size_t(i)] = float(pool[size_t(i)]);
                }
            }
            break;
        }
        case Init::mask: {
            std::uniform_int_distribution<int> pick(0, 3);
            for (size_t i = 0; i < n; ++i) {
                v[i] = (i % size_t(ne0) != 0 && pick(rng) == 0) ? -INFINITY : float(unit(rng));
            }
            break;
        }
        case Init::causal_mask: {
            for (size_t row = 0; row < n / size_t(ne0); ++row) {
                const int64_t limit = std::uniform_int_distribution<int64_t>(1, ne0)(rng);
                for (int64_t i = 0; i < ne0; ++i) {
                    v[row * size_t(ne0) + size_t(i)] = i < limit ? float(unit(rng)) : -INFINITY;
                }
            }
            break;
        }
        case Init::distinct: {
            std::vector<size_t> order(n);
            std::iota(order.begin(), order.end(), size_t(0));
            std::shuffle(order.begin(), order.end(), rng);
            for (size_t i = 0; i < n; ++i) {
                v[i] = float(-1.0 + 2.0 * double(order[i]) / double(n));
            }
            break;
        }
    }
    return v;
}

// The bytes of values stored as t's type (t contiguous).
std::vector<uint8_t> encode(const ggml_tensor * t, const std::vector<float> & v) {
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    const int64_t        n = int64_t(v.size());
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(bytes.data(), v.data(), bytes.size()); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), reinterpret_cast<ggml_bf16_t *>(bytes.data()), n); break;
        case GGML_TYPE_I32:
            for (int64_t i = 0; i < n; ++i) {
                const int32_t x = int32_t(v[size_t(i)]);
                std::memcpy(bytes.data() + i * 4, &x, 4);
            }
            break;
        case GGML_TYPE_I64:
            for (int64_t i = 0; i < n; ++i) {
                const int64_t x = int64_t(v[size_t(i)]);
                std::memcpy(bytes.data() + i * 8, &x, 8);
            }
            break;
        default:
            // Quantized: row by row.
            ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
            break;
    }
    return bytes;
}

// ---- reading results -------------------------------------------------------

// Every element of t as a double, in ggml's element order, through the
// buffer interface (t may be in device memory and non-contiguous).
std::vector<double> read_values(const ggml_tensor * t) {
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
    std::vector<double> out;
    out.reserve(size_t(ggml_nelements(t)));
    const ggml_type_traits * traits = ggml_get_type_traits(t->type);
    std::vector<float>       row(size_t(t->ne[0]));
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                const uint8_t * r = bytes.data() + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                if (ggml_is_quantized(t->type)) {
                    traits->to_float(r, row.data(), t->ne[0]);
                    out.insert(out.end(), row.begin(), row.end());
                    continue;
                }
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    const uint8_t * p = r + i0 * t->nb[0];
                    switch (t->type) {
                        case GGML_TYPE_F32: {
                            float x;
                            std::memcpy(&x, p, 4);
                            out.push_back(x);
                            break;
                        }
                        case GGML_TYPE_F16: {
                            ggml_fp16_t x;
                            std::memcpy(&x, p, 2);
                            out.push_back(ggml_fp16_to_fp32(x));
                            break;
                        }
                        case GGML_TYPE_BF16: {
                            ggml_bf16_t x;
                            std::memcpy(&x, p, 2);
                            out.push_back(ggml_bf16_to_fp32(x));
                            break;
                        }
                        case GGML_TYPE_I32: {
                            int32_t x;
                            std::memcpy(&x, p, 4);
                            out.push_back(x);
                            break;
                        }
                        case GGML_TYPE_I64: {
                            int64_t x;
                            std::memcpy(&x, p, 8);
                            out.push_back(double(x));
                            break;
                        }
                        default: ADD_FAILURE() << "cannot read type " << ggml_type_name(t->type); return out;
                    }
                }
            }
        }
    }
    return out;
}

// ---- comparison ------------------------------------------------------------

struct CompareState {
    const OpCase *           op_case = nullptr;
    int                      compared = 0;
    double                   worst_nmse = 0.0; // over the nodes compared by value
    std::vector<std::string> failures;
};

// Why got differs from want beyond max_nmse; empty when it does not.
std::string compare_values(const std::vector<double> & got, const std::vector<double> & want, double max_nmse) {
    if (const int64_t i = first_nonfinite_mismatch(got, want); i >= 0) {
        return "element " + std::to_string(i) + " is " + std::to_string(got[size_t(i)]) + ", the CPU has " +
               std::to_string(want[size_t(i)]);
    }
    const double e = nmse(got, want);
    if (!(e <= max_nmse)) {
        std::ostringstream s;
        s << "NMSE " << e << " above " << max_nmse;
        return s.str();
    }
    return {};
}

// Each row of k indices holds the same set on both sides.
std::string compare_top_k(std::vector<double> got, std::vector<double> want, int64_t k) {
    for (size_t row = 0; row * size_t(k) < want.size(); ++row) {
        auto g = got.begin() + std::ptrdiff_t(row * size_t(k));
        auto w = want.begin() + std::ptrdiff_t(row * size_t(k));
        std::sort(g, g + k);
        std::sort(w, w + k);
        if (!std::equal(g, g + k, w)) {
            return "row " + std::to_string(row) + " selects other indices than the CPU";
        }
    }
    return {};
}

bool compare_node(int index, ggml_tensor * t1, ggml_tensor * t2, void * user_data) {
    auto * st = static_cast<CompareState *>(user_data);
    ++st->compared;
    const std::vector<double> got  = read_values(t1);
    const std::vector<double> want = read_values(t2);
    if (got.size() != want.size()) {
        st->failures.push_back("node " + std::to_string(index) + ": sizes differ");
        return true;
    }
    const bool        by_value = !(st->op_case->compare == Compare::top_k && t1->op == GGML_OP_TOP_K);
    const std::string why = by_value ? compare_values(got, want, st->op_case->max_nmse)
                                     : compare_top_k(got, want, t1->ne[0]);
    if (by_value) {
        st->worst_nmse = std::max(st->worst_nmse, nmse(got, want));
    }
    if (!why.empty()) {
        st->failures.push_back("node " + std::to_string(index) + " " + describe_node(t1) + ": " + why);
    }
    return true;
}

// Note [What the suite compares]
// Every case compares a device with the CPU backend. Only a device with an
// arithmetic of its own (Vulkan, BLAS, a remote device that is not a CPU)
// checks an implementation against an independent one there; the CPU
// against itself, the test device plugin (which computes through the CPU
// backend) and an RPC server's CPU device check transport, buffers and
// memory paths only. The CPU's arithmetic has its own oracle: the per-op
// tests (test_ops_*) against the double-precision reference. The summary
// printed at the end says how many cases fell on each side.
bool independent_implementation(ggml_backend_dev_t dev) {
    const std::string reg  = ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev));
    const std::string name = ggml_backend_dev_name(dev);
    if (reg == "CPU" || reg == "TestDev") {
        return false;
    }
    return !(reg == "RPC" && name.ends_with("CPU"));
}

struct Tally {
    std::map<std::string, int> compared; // by device: cases compared (not skipped)
    std::map<std::string, int> skipped;
};
Tally & tally() {
    static Tally t;
    return t;
}

class Summary : public ::testing::Environment {
  public:
    void TearDown() override {
        int         independent = 0, through_cpu = 0;
        std::string ind_list, cpu_list;
        for (const auto & [name, n] : tally().compared) {
            ggml_backend_dev_t dev  = ggml_backend_dev_by_name(name.c_str());
            const bool         ind  = dev != nullptr && independent_implementation(dev);
            std::string &      list = ind ? ind_list : cpu_list;
            (ind ? independent : through_cpu) += n;
            list += (list.empty() ? "" : ", ") + name + " " + std::to_string(n);
        }
        int skipped = 0;
        for (const auto & [name, n] : tally().skipped) skipped += n;
        std::printf("[ summary  ] conformance: %d cases against an independent implementation (%s); "
                    "%d cases test transport and memory paths only, computing through the CPU backend (%s); "
                    "%d skipped. The CPU's own arithmetic is checked by the per-op tests against the "
                    "double-precision reference.\n",
                    independent, ind_list.empty() ? "none" : ind_list.c_str(), through_cpu,
                    cpu_list.empty() ? "none" : cpu_list.c_str(), skipped);
    }
};
::testing::Environment * const g_summary = ::testing::AddGlobalTestEnvironment(new Summary);

class Conformance : public ::testing::TestWithParam<Param> {};

TEST_P(Conformance, MatchesTheCpu) {
    const OpCase &     c   = all_cases()[GetParam().case_index];
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(GetParam().device.c_str());
    ASSERT_NE(dev, nullptr) << GetParam().device << " is no longer registered";

    ggml_context_ptr ctx = no_alloc_context(256);
    ASSERT_NE(ctx, nullptr);
    Builder       builder(ctx.get());
    ggml_tensor * out = c.build(builder);
    ggml_set_name(out, "out");
    ggml_cgraph * gf = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(gf, out);

    ggml_backend_ptr backend(ggml_backend_dev_init(dev, nullptr));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_NE(backend, nullptr);
    ASSERT_NE(cpu, nullptr);
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        const ggml_tensor * node = ggml_graph_node(gf, i);
        if (is_view_op(node->op)) {
            continue;
        }
        if (!ggml_backend_supports_op(backend.get(), node)) {
            ++tally().skipped[GetParam().device];
            GTEST_SKIP() << GetParam().device << " does not support " << describe_node(node);
        }
        if (!ggml_backend_supports_op(cpu.get(), node)) {
            ++tally().skipped[GetParam().device];
            GTEST_SKIP() << "the CPU reference does not support " << describe_node(node);
        }
    }

    ggml_backend_buffer_ptr buffer(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_NE(buffer, nullptr) << "cannot allocate the case's tensors on " << GetParam().device;
    std::mt19937 rng(unsigned(std::hash<std::string>()(c.name)));
    for (const auto & [t, init] : builder.inputs()) {
        const std::vector<uint8_t> bytes = encode(t, input_values(t, init, rng));
        ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
    }

    CompareState st;
    st.op_case = &c;
    EXPECT_TRUE(ggml_backend_compare_graph_backend(backend.get(), cpu.get(), gf, compare_node, &st, nullptr, 0));
    EXPECT_GT(st.compared, 0);
    ++tally().compared[GetParam().device];
    for (const std::string & f : st.failures) {
        ADD_FAILURE() << GetParam().device << ": " << f;
    }
    if (verbose()) {
        std::printf("  %s %s: NMSE %.3g (limit %.3g)\n", GetParam().device.c_str(), c.name.c_str(), st.worst_nmse,
                    c.max_nmse);
    }
}

INSTANTIATE_TEST_SUITE_P(BackendOps, Conformance, ::testing::ValuesIn(all_params()), param_name);

// The limits of the F32 products see a loss of precision: operands rounded
// to F16 (a device computing in F16) give an NMSE above them.
TEST(BackendOpsLimits, F16OperandsFailTheF32Products) {
    std::mt19937                          rng(9);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t                         K = 256, M = 33, N = 17;
    std::vector<float>                    a(size_t(K * M)), b(size_t(K * N));
    for (float & x : a) x = u(rng);
    for (float & x : b) x = u(rng);
    std::vector<double> exact(size_t(M * N)), rounded(size_t(M * N));
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            double s = 0.0, r = 0.0;
            for (int64_t k = 0; k < K; ++k) {
                const float x = a[size_t(i * K + k)], y = b[size_t(j * K + k)];
                s += double(x) * double(y);
                r += double(ggml_fp16_to_fp32(ggml_fp32_to_fp16(x))) * double(ggml_fp16_to_fp32(ggml_fp32_to_fp16(y)));
            }
            exact[size_t(j * M + i)]   = s;
            rounded[size_t(j * M + i)] = r;
        }
    }
    int checked = 0;
    for (const OpCase & c : all_cases()) {
        if ((c.name.starts_with("MUL_MAT_f32_") || c.name.starts_with("OUT_PROD_f32_")) && c.max_nmse > 0.0) {
            EXPECT_GT(nmse(rounded, exact), c.max_nmse) << c.name;
            ++checked;
        }
    }
    EXPECT_GT(checked, 10);
}

} // namespace
