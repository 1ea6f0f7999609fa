#pragma once

// Collects what loom logs while it exists, instead of printing it.

#include <mutex>
#include <string>

#include "ggml.h"

namespace loomtest {

class LogCapture {
  public:
    // errors_only: keep error lines (and their continuations) alone.
    explicit LogCapture(bool errors_only = false) : errors_only_(errors_only) {
        ggml_log_get(&prev_cb_, &prev_ud_);
        ggml_log_set(&LogCapture::callback, this);
    }
    ~LogCapture() { ggml_log_set(prev_cb_, prev_ud_); }
    LogCapture(const LogCapture &)             = delete;
    LogCapture & operator=(const LogCapture &) = delete;

    std::string text() {
        std::lock_guard<std::mutex> lock(mutex_);
        return text_;
    }
    bool contains(const std::string & s) { return text().find(s) != std::string::npos; }
    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        text_.clear();
    }

  private:
    static void callback(ggml_log_level level, const char * text, void * user_data) {
        auto * self = static_cast<LogCapture *>(user_data);
        if (self->errors_only_ && level != GGML_LOG_LEVEL_ERROR && level != GGML_LOG_LEVEL_CONT) {
            return;
        }
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->text_ += text;
    }

    bool              errors_only_;
    ggml_log_callback prev_cb_ = nullptr;
    void *            prev_ud_ = nullptr;
    std::mutex        mutex_;
    std::string       text_;
};

} // namespace loomtest
