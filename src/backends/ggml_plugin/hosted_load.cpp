// Opening a ggml plugin and making a loom family of it (backend_impl.h:
// host_ggml_plugin, score_ggml_plugin).

#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "core/common.h"
#include "hosted.h"

// Note [RTLD_DEEPBIND]
// A ggml plugin calls the functions of ggml's libggml-base (buffer init,
// tensor sizes, logging) by name, and so does libloom export them, for
// ggml's programs. Opened plainly, the plugin would bind to the first
// definition in the process, libloom's, and hand loom's functions its own
// structs. RTLD_DEEPBIND makes the plugin and the libggml-base shipped
// beside it (opened first, the same way) look in their own dependencies
// before the process's. AddressSanitizer and ThreadSanitizer refuse
// RTLD_DEEPBIND (their interceptors must come first), so those builds do
// not host plugins.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#    define LOOM_SANITIZER_BUILD 1
#elif defined(__has_feature)
#    if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#        define LOOM_SANITIZER_BUILD 1
#    endif
#endif

namespace loom {

namespace {

namespace fs = std::filesystem;
using ggml_plugin::PluginLibraries;

// Closes the plugin but not its libggml-base, which stays loaded for good
// once opened: ggml's base installs a terminate handler of its own when it
// loads (ggml.cpp), which would dangle once it is unmapped, and asserts when
// loaded again at the same address. ggml's own loader never unloads it either
// (its plugins' programs link it).
void close_libraries(PluginLibraries & libs) {
    if (libs.plugin != nullptr) {
        dlclose(libs.plugin);
    }
    libs = {};
}

void * open_deep(const std::string & path, std::string * why) {
#ifdef LOOM_SANITIZER_BUILD
    (void) path;
    *why = "it does not export loom_backend_api_version, and this build of loom cannot host ggml plugins: it uses "
           "a sanitizer, which refuses RTLD_DEEPBIND";
    return nullptr;
#else
    void * handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
        const char * error = dlerror();
        *why               = error != nullptr ? error : "unknown dlopen error";
    }
    return handle;
#endif
}

// Routes the plugin's log (through its libggml-base) to loom's.
void forward_log(ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    log(level, "%s", text);
}

bool open_libraries(const char * path, PluginLibraries * libs, std::string * why) {
    std::error_code ec;
    const fs::path  base = fs::path(path).parent_path() / "libggml-base.so";
    if (fs::exists(base, ec)) {
        libs->base = open_deep(base.string(), why);
        if (libs->base == nullptr) {
            *why = "cannot open " + base.string() + ": " + *why;
            return false;
        }
    }
    libs->plugin = open_deep(path, why);
    if (libs->plugin == nullptr) {
        close_libraries(*libs);
        return false;
    }
    if (dlsym(libs->plugin, "loom_backend_api_version") != nullptr) {
        *why = "it is a loom plugin, not a ggml one";
        close_libraries(*libs);
        return false;
    }
    return true;
}

int score_of(const PluginLibraries & libs) {
    auto fn = reinterpret_cast<ggml_abi::ScoreFn>(dlsym(libs.plugin, "ggml_backend_score"));
    return fn != nullptr ? fn() : 1;
}

} // namespace

int score_ggml_plugin(const char * path, std::string * why) {
    PluginLibraries libs;
    if (!open_libraries(path, &libs, why)) {
        return 0;
    }
    const int score = score_of(libs);
    close_libraries(libs);
    return score;
}

ggml_backend_reg * host_ggml_plugin(const char * path, std::string * why) {
    PluginLibraries libs;
    if (!open_libraries(path, &libs, why)) {
        return nullptr;
    }
    if (score_of(libs) == 0) {
        *why = "it cannot run on this processor (its ggml_backend_score is 0)";
        close_libraries(libs);
        return nullptr;
    }
    auto init = reinterpret_cast<ggml_abi::InitFn>(dlsym(libs.plugin, "ggml_backend_init"));
    // Searched in the plugin's dependencies too: ggml's libggml-base frees
    // the buffers its ggml_backend_buffer_init made.
    auto buffer_free = reinterpret_cast<ggml_abi::BufferFreeFn>(dlsym(libs.plugin, "ggml_backend_buffer_free"));
    if (init == nullptr || buffer_free == nullptr || reinterpret_cast<void *>(buffer_free) == reinterpret_cast<void *>(&ggml_backend_buffer_free)) {
        *why = init == nullptr ? "it exports no ggml_backend_init"
                               : "it is neither a loom plugin (it does not export loom_backend_api_version) nor a "
                                 "ggml one (it does not link ggml's libggml-base)";
        close_libraries(libs);
        return nullptr;
    }
    if (auto log_set = reinterpret_cast<ggml_abi::LogSetFn>(dlsym(libs.plugin, "ggml_log_set"))) {
        log_set(forward_log, nullptr);
    }
    ggml_abi::Reg * reg = init();
    if (reg == nullptr) {
        *why = "its ggml_backend_init failed (returned NULL)";
        close_libraries(libs);
        return nullptr;
    }
    if (reg->api_version != ggml_abi::k_api_version) {
        *why = "it was built for ggml backend API version " + std::to_string(reg->api_version) +
               "; loom hosts version " + std::to_string(ggml_abi::k_api_version) + " (ggml 0.25.1)";
        close_libraries(libs);
        return nullptr;
    }
    // The same plugin again (its reg is a static of the library): the loom
    // family made the first time, which the registry then knows.
    bool fresh = false;
    ggml_backend_reg * hosted = ggml_plugin::HostedReg::of(libs, reg, buffer_free, &fresh);
    if (!fresh) {
        close_libraries(libs); // the first loading keeps it open
    }
    return hosted;
}

} // namespace loom
