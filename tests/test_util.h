#pragma once

// Helpers shared by the op tests: a context owner, graph computation in the
// configurations every op is checked in, and comparison with a reference.

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "reference.h"

namespace loomtest {

// Owns a ggml context whose tensors get data in the arena.
class Context {
public:
    explicit Context(size_t mem_size = size_t(64) << 20);
    ~Context();
    Context(const Context &)             = delete;
    Context & operator=(const Context &) = delete;

    ggml_context * get() const { return ctx_; }
    operator ggml_context *() const { return ctx_; }

private:
    ggml_context * ctx_;
};

// How a graph is computed: thread count, and whether only the portable kernels run.
struct RunMode {
    int  n_threads;
    bool use_ref;
};
std::string describe(const RunMode & m);

// One thread, several threads, and the portable kernels with two threads.
const std::vector<RunMode> & run_modes();

// Builds the graph of outs in ctx and computes it: with
// ggml_graph_compute_with_ctx, or through ggml_graph_plan/ggml_graph_compute
// with use_ref set when the mode asks for the portable kernels.
ggml_status compute(ggml_context * ctx, std::initializer_list<ggml_tensor *> outs, const RunMode & mode);
ggml_status compute(ggml_context * ctx, ggml_tensor * out, const RunMode & mode);
ggml_status compute(ggml_context * ctx, ggml_tensor * out, int n_threads);

// The tensor's values against the reference: same shape, every non-finite
// expected value matched exactly (same infinity, or NaN), NMSE of the finite
// values at most max_nmse and, when max_abs >= 0, no finite value off by more
// than max_abs.
::testing::AssertionResult matches(const ggml_tensor * got, const Array & want, double max_nmse,
                                   double max_abs = -1.0);
::testing::AssertionResult matches(const Array & got, const Array & want, double max_nmse, double max_abs = -1.0);

// True when LOOMTEST_VERBOSE is set: check_modes then prints every comparison's error.
bool verbose();

// Computes out in every run mode and checks it against want each time
// (see matches). Between runs, an output that owns its memory is overwritten
// with 0xff bytes so that every run has to produce it again.
void check_modes(ggml_context * ctx, ggml_tensor * out, const Array & want, double max_nmse, double max_abs = -1.0);

// Named lists of numbers, one per line: "name count v1 v2 ...", as the
// generators against ggml write them (tests/data/*/ggml-0.25.1.txt). Empty,
// with *why set, when the file cannot be read or a line is malformed.
std::map<std::string, std::vector<double>> read_named_values(const std::string & path, std::string * why);

// A random size in [lo, hi] that is odd.
int64_t odd_size(std::mt19937 & rng, int64_t lo, int64_t hi);
// A random integer in [lo, hi].
int64_t rand_int(std::mt19937 & rng, int64_t lo, int64_t hi);

// The seeds every randomised test runs with.
const std::vector<unsigned> & seeds();

} // namespace loomtest
