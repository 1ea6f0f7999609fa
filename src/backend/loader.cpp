// Backend plugins: loading a backend family from a shared library, and
// finding the libraries of every family in the search directories.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "core/common.h"
#include "registry.h"

namespace fs = std::filesystem;

namespace loom {

namespace {

// Where ggml_backend_load_all looks, from GGML_BACKEND_PATH, and which of
// ggml's own plugin families it loads, from LOOM_GGML_PLUGINS.
struct LoaderConfig {
    std::vector<fs::path>    dirs;          // searched for plugin files
    std::vector<fs::path>    files;         // loaded as given
    std::vector<std::string> ggml_families; // "cpu", "vulkan", ... or "all"

    bool wants_ggml(const std::string & family) const {
        return std::find(ggml_families.begin(), ggml_families.end(), family) != ggml_families.end() ||
               std::find(ggml_families.begin(), ggml_families.end(), "all") != ggml_families.end();
    }

    static LoaderConfig parse(const char * value, const char * ggml_plugins) {
        LoaderConfig cfg;
        if (ggml_plugins != nullptr) {
            const std::string list(ggml_plugins);
            size_t            start = 0;
            while (start < list.size()) {
                const size_t end = std::min(list.find(',', start), list.size());
                if (end > start) {
                    cfg.ggml_families.push_back(list.substr(start, end - start));
                }
                start = end + 1;
            }
        }
        if (value == nullptr) {
            return cfg;
        }
        const std::string list(value);
        size_t            start = 0;
        while (start <= list.size()) {
            size_t end = list.find(':', start);
            if (end == std::string::npos) {
                end = list.size();
            }
            if (end > start) {
                fs::path        p(list.substr(start, end - start));
                std::error_code ec;
                (fs::is_directory(p, ec) ? cfg.dirs : cfg.files).push_back(std::move(p));
            }
            start = end + 1;
        }
        return cfg;
    }

    // The environment is read once; later changes to it are not seen.
    static const LoaderConfig & process() {
        static const LoaderConfig cfg = parse(std::getenv("GGML_BACKEND_PATH"), std::getenv("LOOM_GGML_PLUGINS"));
        return cfg;
    }
};

constexpr const char * k_prefix      = "libloom-";
constexpr const char * k_ggml_prefix = "libggml-";
constexpr const char * k_extension   = ".so";
constexpr const char * k_ggml_tag    = "ggml:";

// The family of a file named prefix<family>[-<variant>].so, or "".
std::string family_after(const std::string & name, const std::string & prefix) {
    const std::string ext = k_extension;
    if (name.size() <= prefix.size() + ext.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
        return {};
    }
    const std::string stem = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
    return stem.substr(0, stem.find('-'));
}

// The family a plugin file belongs to ("libloom-vulkan-avx2.so" -> "vulkan";
// ggml's "libggml-cpu-haswell.so" -> "ggml:cpu"), or an empty string for a
// file that is not a plugin. ggml's libggml-base.so is the library its
// plugins link to, not one of them.
std::string family_of(const fs::path & file) {
    const std::string name = file.filename().string();
    if (std::string family = family_after(name, k_prefix); !family.empty()) {
        return family;
    }
    const std::string family = family_after(name, k_ggml_prefix);
    return family.empty() || family == "base" ? std::string() : k_ggml_tag + family;
}

bool is_ggml_family(const std::string & family) {
    return family.rfind(k_ggml_tag, 0) == 0;
}

// Opens path and checks that it is a loom plugin of this API version. On
// failure returns an empty library and logs why at level.
SharedLibrary open_plugin(const std::string & path, ggml_log_level level, const char * caller) {
    std::string   error;
    SharedLibrary lib = SharedLibrary::open(path, &error);
    if (!lib) {
        log(level, "%s: cannot load %s: %s\n", caller, path.c_str(), error.c_str());
        return lib;
    }
    auto version_fn = reinterpret_cast<loom_backend_api_version_t>(lib.symbol("loom_backend_api_version"));
    if (version_fn == nullptr) {
        log(level, "%s: %s is not a loom backend: it does not export loom_backend_api_version\n", caller,
            path.c_str());
        return {};
    }
    const int version = version_fn();
    if (version != LOOM_BACKEND_API_VERSION) {
        log(level, "%s: %s was built for backend API version %d, this library has version %d\n", caller,
            path.c_str(), version, LOOM_BACKEND_API_VERSION);
        return {};
    }
    return lib;
}

// The library's score: 1 when it does not say, 0 when it cannot run here.
int score_of(const SharedLibrary & lib) {
    auto score_fn = reinterpret_cast<ggml_backend_score_t>(lib.symbol("ggml_backend_score"));
    return score_fn != nullptr ? score_fn() : 1;
}

// Registers reg, which came from path (and from lib, for a loom plugin).
ggml_backend_reg * add(ggml_backend_reg * reg, SharedLibrary & lib, const std::string & path, ggml_log_level level) {
    const char * caller = "ggml_backend_load";
    switch (Registry::get().add_loaded(reg, lib)) {
        case Registry::AddResult::added:
            LOOM_LOG_INFO("%s: loaded backend %s (%zu devices) from %s\n", caller, reg->name(), reg->device_count(),
                          path.c_str());
            return reg;
        case Registry::AddResult::already_present:
            // The same library again: the registry's reference keeps it open.
            return reg;
        case Registry::AddResult::name_taken:
            log(level, "%s: a backend named %s is already registered; %s not loaded\n", caller, reg->name(),
                path.c_str());
            return nullptr;
    }
    return nullptr;
}

// A ggml plugin (Note [Telling plugins apart] in shared_library.cpp), hosted
// as a loom family. The hosted reg is never freed: once loaded, a plugin of
// ggml's stays loaded (backend_impl.h: host_ggml_plugin).
ggml_backend_reg * load_ggml(const std::string & path, ggml_log_level level) {
    std::string        why;
    ggml_backend_reg * reg = host_ggml_plugin(path.c_str(), &why);
    if (reg == nullptr) {
        log(level, "ggml_backend_load: cannot host %s as a ggml plugin: %s\n", path.c_str(), why.c_str());
        return nullptr;
    }
    SharedLibrary none;
    return add(reg, none, path, level);
}

ggml_backend_reg * load(const std::string & path, ggml_log_level level) {
    const char * caller = "ggml_backend_load";
    if (SharedLibrary::file_exports(path, "loom_backend_api_version") == false &&
        SharedLibrary::file_exports(path, "ggml_backend_init") == true) {
        return load_ggml(path, level);
    }
    SharedLibrary lib = open_plugin(path, level, caller);
    if (!lib) {
        return nullptr;
    }
    if (score_of(lib) == 0) {
        log(level, "%s: %s cannot run on this machine (its ggml_backend_score is 0)\n", caller, path.c_str());
        return nullptr;
    }
    auto init_fn = reinterpret_cast<ggml_backend_init_t>(lib.symbol("ggml_backend_init"));
    if (init_fn == nullptr) {
        log(level, "%s: %s does not export ggml_backend_init\n", caller, path.c_str());
        return nullptr;
    }
    ggml_backend_reg * reg = init_fn();
    if (reg == nullptr) {
        log(level, "%s: ggml_backend_init of %s failed (returned NULL)\n", caller, path.c_str());
        return nullptr;
    }
    return add(reg, lib, path, level);
}

// The score of a candidate file of family; 0 when it cannot be loaded.
int candidate_score(const std::string & family, const fs::path & file, const char * caller) {
    if (!is_ggml_family(family)) {
        const SharedLibrary lib = open_plugin(file.string(), GGML_LOG_LEVEL_WARN, caller);
        return lib ? score_of(lib) : 0;
    }
    std::string why;
    const int   score = score_ggml_plugin(file.c_str(), &why);
    if (!why.empty()) {
        LOOM_LOG_WARN("%s: cannot host %s as a ggml plugin: %s\n", caller, file.c_str(), why.c_str());
    }
    return score;
}

std::vector<fs::path> default_search_dirs() {
    std::vector<fs::path> dirs = LoaderConfig::process().dirs;
    std::error_code       ec;
    const fs::path        exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        dirs.push_back(exe.parent_path());
    }
    const fs::path cwd = fs::current_path(ec);
    if (!ec) {
        dirs.push_back(cwd);
    }
    return dirs;
}

// Loads the best variant of every plugin family found in dirs.
void load_all(const std::vector<fs::path> & dirs) {
    const char * caller = "ggml_backend_load_all";
    // Family -> its candidate files, in a stable order.
    std::map<std::string, std::vector<fs::path>> families;
    std::vector<fs::path>                        seen_dirs;
    for (const fs::path & dir : dirs) {
        std::error_code ec;
        const fs::path  canonical = fs::weakly_canonical(dir, ec);
        if (ec || std::find(seen_dirs.begin(), seen_dirs.end(), canonical) != seen_dirs.end()) {
            continue;
        }
        seen_dirs.push_back(canonical);
        fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
        if (ec) {
            LOOM_LOG_DEBUG("%s: cannot search %s: %s\n", caller, dir.c_str(), ec.message().c_str());
            continue;
        }
        for (; it != fs::directory_iterator(); it.increment(ec)) {
            if (ec) {
                break;
            }
            const std::string family = family_of(it->path());
            if (!family.empty() && it->is_regular_file(ec)) {
                families[family].push_back(it->path());
            }
        }
    }
    for (const auto & [family, files] : families) {
        // loom has its own CPU and Vulkan backends, which it prefers: ggml's
        // plugins of a family load only when LOOM_GGML_PLUGINS names it.
        if (is_ggml_family(family) && !LoaderConfig::process().wants_ggml(family.substr(std::strlen(k_ggml_tag)))) {
            LOOM_LOG_DEBUG("%s: ggml's %s plugins not loaded (LOOM_GGML_PLUGINS does not name %s)\n", caller,
                           family.c_str(), family.c_str() + std::strlen(k_ggml_tag));
            continue;
        }
        fs::path best;
        int      best_score = 0;
        for (const fs::path & file : files) {
            const int s = candidate_score(family, file, caller);
            LOOM_LOG_DEBUG("%s: %s scores %d\n", caller, file.c_str(), s);
            if (s > best_score) {
                best_score = s;
                best       = file;
            }
        }
        if (best_score > 0) {
            load(best.string(), GGML_LOG_LEVEL_WARN);
        } else {
            LOOM_LOG_INFO("%s: no usable library of backend %s\n", caller, family.c_str());
        }
    }
}

} // namespace

} // namespace loom

extern "C" {

// The loader uses std::filesystem and std::string, which report running out
// of memory with exceptions; those are turned into logged failures here so
// that none crosses the C boundary.

ggml_backend_reg_t ggml_backend_load(const char * path) {
    LOOM_REQUIRE(path != nullptr, "NULL path");
    try {
        return loom::load(path, GGML_LOG_LEVEL_ERROR);
    } catch (const std::exception & e) {
        LOOM_LOG_ERROR("%s: cannot load %s: %s\n", __func__, path, e.what());
        return nullptr;
    }
}

void ggml_backend_unload(ggml_backend_reg_t reg) {
    LOOM_REQUIRE(reg != nullptr, "NULL reg");
    loom::SharedLibrary library;
    if (!loom::Registry::get().remove(reg, &library)) {
        LOOM_LOG_ERROR("%s: backend %p is not registered\n", __func__, static_cast<void *>(reg));
        return;
    }
    // The library closes here, once the registry no longer refers to its reg.
}

void ggml_backend_load_all(void) {
    ggml_backend_load_all_from_path(nullptr);
}

void ggml_backend_load_all_from_path(const char * dir_path) {
    try {
        if (dir_path != nullptr) {
            loom::load_all({fs::path(dir_path)});
            return;
        }
        loom::load_all(loom::default_search_dirs());
        for (const fs::path & file : loom::LoaderConfig::process().files) {
            loom::load(file.string(), GGML_LOG_LEVEL_WARN);
        }
    } catch (const std::exception & e) {
        LOOM_LOG_ERROR("%s: %s\n", __func__, e.what());
    }
}

} // extern "C"
