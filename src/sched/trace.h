#pragma once

// Chrome trace events (chrome://tracing, Perfetto) of scheduler runs: one
// track per backend with its splits, input copies and, at level 2, nodes.

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace loom::sched {

struct TraceEvent {
    std::string name;
    std::string category; // "split", "copy", "node"
    int         track;    // backend index
    int64_t     ts_us;
    int64_t     dur_us;
    size_t      bytes;
};

struct Trace {
    std::string              path;
    std::vector<std::string> track_names;
    std::vector<TraceEvent>  events;
    std::mutex               mutex;

    void add(TraceEvent e) {
        std::lock_guard<std::mutex> lock(mutex);
        events.push_back(std::move(e));
    }
    // Writes the JSON file; returns false (logged) when it cannot.
    bool write() const;
};

} // namespace loom::sched
