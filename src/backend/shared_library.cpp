// Shared libraries of backend plugins, opened and closed through dlopen.

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
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

// Note [Telling plugins apart]
// A loom plugin exports loom_backend_api_version; a ggml plugin does not,
// and must be opened differently (Note [RTLD_DEEPBIND] in
// src/backends/ggml_plugin/hosted_load.cpp): opening it the loom way first
// would bind it to libloom for good. So the loader reads the file's dynamic
// symbol table before it opens anything.
std::optional<bool> SharedLibrary::file_exports(const std::string & path, const char * name) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return std::nullopt;
    }
    struct stat st {};
    void * map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Elf64_Ehdr))) {
        map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    }
    ::close(fd);
    if (map == MAP_FAILED) {
        return std::nullopt;
    }
    const size_t          size  = static_cast<size_t>(st.st_size);
    const auto *          bytes = static_cast<const unsigned char *>(map);
    std::optional<bool>   found;
    // Every offset and count below comes from the file and is checked
    // against its size before use.
    const auto in_file = [size](uint64_t offset, uint64_t count, uint64_t each) {
        return each != 0 && offset <= size && count <= (size - offset) / each;
    };
    Elf64_Ehdr eh;
    std::memcpy(&eh, bytes, sizeof(eh));
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_shentsize == sizeof(Elf64_Shdr) && in_file(eh.e_shoff, eh.e_shnum, sizeof(Elf64_Shdr))) {
        found = false;
        for (size_t i = 0; i < eh.e_shnum && !*found; ++i) {
            Elf64_Shdr sh;
            std::memcpy(&sh, bytes + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
            if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= eh.e_shnum || !in_file(sh.sh_offset, sh.sh_size, 1)) {
                continue;
            }
            Elf64_Shdr strtab;
            std::memcpy(&strtab, bytes + eh.e_shoff + sh.sh_link * sizeof(Elf64_Shdr), sizeof(strtab));
            if (!in_file(strtab.sh_offset, strtab.sh_size, 1)) {
                continue;
            }
            const char * strings = reinterpret_cast<const char *>(bytes + strtab.sh_offset);
            const size_t n_syms  = sh.sh_size / sizeof(Elf64_Sym);
            const size_t len     = std::strlen(name);
            for (size_t k = 0; k < n_syms; ++k) {
                Elf64_Sym sym;
                std::memcpy(&sym, bytes + sh.sh_offset + k * sizeof(Elf64_Sym), sizeof(sym));
                if (sym.st_shndx != SHN_UNDEF && sym.st_name < strtab.sh_size &&
                    strtab.sh_size - sym.st_name > len && std::memcmp(strings + sym.st_name, name, len + 1) == 0) {
                    found = true;
                    break;
                }
            }
        }
    }
    munmap(map, size);
    return found;
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
