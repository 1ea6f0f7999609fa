// Shared libraries of backend plugins, opened and closed through dlopen.

#include <dlfcn.h>
#include <utility>

#include "registry.h"

namespace loom {

SharedLibrary::~SharedLibrary() {
    close();
}

SharedLibrary::SharedLibrary(SharedLibrary && other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

SharedLibrary & SharedLibrary::operator=(SharedLibrary && other) noexcept {
    if (this != &other) {
        close();
        handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
}

SharedLibrary SharedLibrary::open(const std::string & path, std::string * error) {
    // RTLD_LOCAL: a plugin's own symbols never satisfy another library's.
    void * handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr && error != nullptr) {
        const char * why = dlerror();
        *error           = why != nullptr ? why : "unknown dlopen error";
    }
    return SharedLibrary(handle);
}

void * SharedLibrary::symbol(const char * name) const {
    return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

void SharedLibrary::close() {
    if (handle_ != nullptr) {
        dlclose(handle_);
        handle_ = nullptr;
    }
}

} // namespace loom
