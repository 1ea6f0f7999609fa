#pragma once

// Command-line options of loom-train.

#include <cstdint>
#include <string>
#include <vector>

namespace loom_train {

struct Options {
    // The model: an MLP from 2 inputs through `layers` hidden layers of
    // `hidden` units (ReLU) to `classes` logits.
    int         hidden    = 32;
    int         layers    = 2;
    // The data: `classes` interleaved spirals of `points` points in all,
    // drawn from `seed` (which also draws the initial weights).
    int         classes   = 3;
    int64_t     points    = 1536;
    uint32_t    seed      = 42;
    // Training.
    int         epochs    = 40;
    int64_t     batch     = 32;
    float       lr        = 0.01f;
    bool        sgd       = false;      // --optimizer sgd; default adamw
    float       val_split = 0.125f;     // fraction of the points held out
    int         n_threads = 0;          // <= 0: the backends' default
    std::vector<std::string> devices;   // --device, in priority order
    std::string output;                 // -o: where the trained model goes
    std::string eval;                   // --eval: evaluate this model instead of training
    bool        progress  = true;       // --no-progress turns the progress bar off
    bool        help      = false;
};

// Parses argv (argv[0] is skipped). Returns false with *error set on an
// unknown flag, a missing or malformed value, or values that do not fit
// together (fewer than two batches of training points, for example).
bool parse_args(int argc, const char * const * argv, Options * options, std::string * error);

// The text of --help.
std::string usage(const char * program);

} // namespace loom_train
