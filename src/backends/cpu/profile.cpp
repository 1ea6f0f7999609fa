#include "profile.h"

#include "core/graph.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace loom::cpu {

namespace {

struct KindTotals {
    int64_t nodes   = 0;
    double  span_ns = 0; // thread 0's barrier to barrier
    double  busy_ns = 0; // mean over threads of the computing time
};

// The totals of every recorded graph; printed when the process exits.
class Profile {
  public:
    ~Profile() { print(); }

    void add(const ggml_cgraph * graph, const GraphTimes & t) {
        const std::lock_guard lock(mutex_);
        ++graphs_;
        total_ns_ += t.end - t.begin;
        int64_t start = t.begin;
        for (int i = 0; i < graph->n_nodes;) {
            if (t.released[size_t(i)] == 0) {
                ++i;
                continue; // computes nothing
            }
            // Nodes computed together (a group of products) share one
            // release; their time is shared out equally.
            int members = 1;
            int j       = i + 1;
            for (; j < graph->n_nodes; ++j) {
                if (t.released[size_t(j)] == 0) continue;
                if (t.released[size_t(j)] != t.released[size_t(i)]) break;
                ++members;
            }
            const double share = 1.0 / double(members);
            const int64_t span = t.released[size_t(i)] - start;
            double        busy = 0;
            for (int th = 0; th < t.nth; ++th) {
                busy += double(std::max<int64_t>(0, t.done[size_t(i) * size_t(t.nth) + size_t(th)] - start));
            }
            for (int m = i; m < j; ++m) {
                if (t.released[size_t(m)] == 0) continue;
                KindTotals & k = kinds_[kind(graph->nodes[m])];
                ++k.nodes;
                k.span_ns += span * share;
                k.busy_ns += busy / t.nth * share;
            }
            start = t.released[size_t(i)];
            i     = j;
        }
    }

  private:
    static std::string kind(const ggml_tensor * node) {
        std::string s = ggml_op_desc(node);
        if (node->op == GGML_OP_MUL_MAT && node->src[0] != nullptr) {
            s += ' ';
            s += ggml_type_name(node->src[0]->type);
            s += node->ne[1] == 1 ? ", 1 column" : ", columns";
        }
        return s;
    }

    void print() const {
        if (graphs_ == 0) {
            return;
        }
        double in_nodes = 0;
        for (const auto & [name, k] : kinds_) in_nodes += k.span_ns;
        std::fprintf(stderr,
                     "loom CPU profile (LOOM_CPU_PROFILE): %lld graphs, %.1f ms computing, %.1f ms of it in nodes\n",
                     static_cast<long long>(graphs_), double(total_ns_) * 1e-6, double(in_nodes) * 1e-6);
        std::fprintf(stderr, "  %-34s %9s %11s %7s %10s %6s\n", "node", "count", "time (ms)", "share", "us/node",
                     "busy");
        std::vector<std::pair<std::string, KindTotals>> rows(kinds_.begin(), kinds_.end());
        std::sort(rows.begin(), rows.end(), [](const auto & x, const auto & y) { return x.second.span_ns > y.second.span_ns; });
        for (const auto & [name, k] : rows) {
            std::fprintf(stderr, "  %-34s %9lld %11.2f %6.1f%% %10.2f %5.1f%%\n", name.c_str(),
                         static_cast<long long>(k.nodes), double(k.span_ns) * 1e-6,
                         in_nodes > 0 ? 100.0 * double(k.span_ns) / double(in_nodes) : 0.0,
                         double(k.span_ns) * 1e-3 / double(k.nodes),
                         k.span_ns > 0 ? 100.0 * k.busy_ns / double(k.span_ns) : 0.0);
        }
    }

    std::mutex                        mutex_;
    int64_t                           graphs_   = 0;
    int64_t                           total_ns_ = 0;
    std::map<std::string, KindTotals> kinds_;
};

Profile & the_profile() {
    static Profile p;
    return p;
}

} // namespace

bool profiling() {
    static const bool on = [] {
        const char * v = std::getenv("LOOM_CPU_PROFILE");
        return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
    }();
    return on;
}

int64_t profile_now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void profile_record(const ggml_cgraph * graph, const GraphTimes & times) {
    the_profile().add(graph, times);
}

} // namespace loom::cpu
