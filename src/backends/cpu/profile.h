#pragma once

// Note [Node profile]
// With LOOM_CPU_PROFILE set (to anything but "0"), each graph the CPU
// backend computes records, for every node, when each thread finished its
// share of the node and when the barrier after the node let thread 0 go on.
// When the process exits, the totals of all graphs are printed to standard
// error, one line per kind of node (the op; for matrix products also the
// weight type and whether it had one column or more):
//  - time: from the release of the barrier before the node to the release
//    of the barrier after it, as thread 0 saw it;
//  - busy: the share of that time the threads spent computing, the rest
//    being waits for the slowest thread and the barrier itself.
// Without the variable nothing is recorded and nothing is printed.

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace loom::cpu {

// Whether LOOM_CPU_PROFILE asks for the profile (read once).
bool profiling();

// Monotonic nanoseconds.
int64_t profile_now();

// The times of one graph computation. done[i * nth + t]: when thread t
// finished node i; released[i]: when thread 0 passed the barrier after node
// i. Nodes that compute nothing keep zeros. begin: thread 0 before the first
// node; end: after the last barrier.
struct GraphTimes {
    int                  nth   = 1;
    int64_t              begin = 0;
    int64_t              end   = 0;
    std::vector<int64_t> done;
    std::vector<int64_t> released;
};

// Adds one computation of graph to the totals printed at exit.
void profile_record(const ggml_cgraph * graph, const GraphTimes & times);

} // namespace loom::cpu
