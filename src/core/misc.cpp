// Process-wide services of the core: abort, logging, time, names.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common.h"

namespace {

std::atomic<ggml_abort_callback_t> g_abort_callback{nullptr};

struct LogState {
    std::mutex        mutex;
    ggml_log_callback callback  = nullptr;
    void *            user_data = nullptr;
};
LogState & log_state() {
    static LogState s;
    return s;
}

void default_log(ggml_log_level level, const char * text, void *) {
    (void) level;
    std::fputs(text, stderr);
    std::fflush(stderr);
}

void vlog(ggml_log_level level, const char * fmt, va_list args) {
    ggml_log_callback cb;
    void *            ud;
    {
        std::lock_guard<std::mutex> lock(log_state().mutex);
        cb = log_state().callback ? log_state().callback : default_log;
        ud = log_state().user_data;
    }
    char    buf[512];
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(buf, sizeof(buf), fmt, args);
    if (n >= 0 && size_t(n) < sizeof(buf)) {
        cb(level, buf, ud);
    } else if (n >= 0) {
        std::string big(size_t(n) + 1, '\0');
        std::vsnprintf(big.data(), big.size(), fmt, copy);
        cb(level, big.c_str(), ud);
    }
    va_end(copy);
}

const auto g_time_start = std::chrono::steady_clock::now();

} // namespace

namespace loom {

void fail(const char * func, const char * fmt, ...) {
    char    msg[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, args);
    va_end(args);
    ggml_abort(func, 0, "%s", msg);
}

void log(ggml_log_level level, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vlog(level, fmt, args);
    va_end(args);
}

} // namespace loom

extern "C" {

ggml_abort_callback_t ggml_set_abort_callback(ggml_abort_callback_t callback) {
    return g_abort_callback.exchange(callback);
}

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    char msg[1536];
    // A file or function name longer than a path should be keeps its end
    // (the part that names it), so that the message after it fits.
    constexpr size_t k_max_name = 256;
    if (file == nullptr) {
        file = "?";
    } else if (const size_t len = std::strlen(file); len > k_max_name) {
        file += len - k_max_name;
    }
    int     n = line > 0 ? std::snprintf(msg, sizeof(msg), "%s:%d: ", file, line)
                         : std::snprintf(msg, sizeof(msg), "%s: ", file);
    // snprintf returns the length it wanted, which may pass the end of msg.
    n = std::clamp(n, 0, int(sizeof(msg)) - 1);
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(msg + n, sizeof(msg) - size_t(n), fmt, args);
    va_end(args);
    if (ggml_abort_callback_t cb = g_abort_callback.load()) {
        cb(msg);
    } else {
        std::fprintf(stderr, "%s\n", msg);
        std::fflush(stderr);
    }
    std::abort();
}

const char * ggml_status_to_string(ggml_status status) {
    switch (status) {
        case GGML_STATUS_ALLOC_FAILED: return "GGML status: error (failed to allocate memory)";
        case GGML_STATUS_FAILED: return "GGML status: error (operation failed)";
        case GGML_STATUS_SUCCESS: return "GGML status: success";
        case GGML_STATUS_ABORTED: return "GGML status: warning (operation aborted)";
    }
    return "GGML status: unknown";
}

void ggml_log_set(ggml_log_callback log_callback, void * user_data) {
    std::lock_guard<std::mutex> lock(log_state().mutex);
    log_state().callback  = log_callback;
    log_state().user_data = user_data;
}

void ggml_log_get(ggml_log_callback * log_callback, void ** user_data) {
    std::lock_guard<std::mutex> lock(log_state().mutex);
    if (log_callback) *log_callback = log_state().callback ? log_state().callback : default_log;
    if (user_data) *user_data = log_state().user_data;
}

bool ggml_guid_matches(ggml_guid_t a, ggml_guid_t b) {
    return std::memcmp(a, b, sizeof(ggml_guid)) == 0;
}

const char * ggml_version(void) {
    return LOOM_VERSION;
}
const char * ggml_commit(void) {
    return "loom";
}

void ggml_time_init(void) {}

int64_t ggml_time_ms(void) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - g_time_start)
        .count();
}
int64_t ggml_time_us(void) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - g_time_start)
        .count();
}
int64_t ggml_cycles(void) {
    return int64_t(std::clock());
}
int64_t ggml_cycles_per_ms(void) {
    return CLOCKS_PER_SEC / 1000;
}

FILE * ggml_fopen(const char * fname, const char * mode) {
    return std::fopen(fname, mode);
}

const char * ggml_op_name(ggml_op op) {
    const loom::OpInfo * i = loom::op_info(op);
    return i != nullptr ? i->name : "UNKNOWN";
}
const char * ggml_op_symbol(ggml_op op) {
    const loom::OpInfo * i = loom::op_info(op);
    return i != nullptr ? i->symbol : "?";
}
const char * ggml_unary_op_name(ggml_unary_op op) {
    const loom::UnaryInfo * i = loom::unary_info(op);
    return i != nullptr ? i->name : "UNKNOWN";
}
const char * ggml_glu_op_name(ggml_glu_op op) {
    const loom::GluInfo * i = loom::glu_info(op);
    return i != nullptr ? i->name : "UNKNOWN";
}
const char * ggml_op_desc(const ggml_tensor * t) {
    if (t->op == GGML_OP_UNARY) {
        return ggml_unary_op_name(ggml_get_unary_op(t));
    }
    if (t->op == GGML_OP_GLU) {
        return ggml_glu_op_name(ggml_get_glu_op(t));
    }
    return ggml_op_name(t->op);
}

} // extern "C"
