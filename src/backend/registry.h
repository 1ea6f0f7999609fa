#pragma once

// The process-wide registry of backend families (regs) and their devices,
// and the shared libraries that plugin families came from.

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend_impl.h"

namespace loom {

// An open shared library; closed when destroyed unless released.
class SharedLibrary {
  public:
    SharedLibrary() = default;
    ~SharedLibrary();
    SharedLibrary(SharedLibrary && other) noexcept;
    SharedLibrary & operator=(SharedLibrary && other) noexcept;
    SharedLibrary(const SharedLibrary &)             = delete;
    SharedLibrary & operator=(const SharedLibrary &) = delete;

    // An empty library with *error set when the file cannot be loaded.
    static SharedLibrary open(const std::string & path, std::string * error);

    // Whether the ELF file at path exports a dynamic symbol named name,
    // read from the file without loading it; nullopt when the file cannot
    // be read as a 64-bit ELF shared object.
    static std::optional<bool> file_exports(const std::string & path, const char * name);

    explicit operator bool() const { return handle_ != nullptr; }
    // The address of an exported symbol, or NULL.
    void * symbol(const char * name) const;
    // Forgets the library without closing it.
    void release() { handle_ = nullptr; }

  private:
    explicit SharedLibrary(void * handle) : handle_(handle) {}
    void close();

    void * handle_ = nullptr;
};

// The backend families built into the library, in order of preference:
// what the registry holds before anything is loaded or registered. Defined
// by the backends (src/backends/builtin.cpp), which the backend layer does
// not include (docs/DESIGN-layers.md).
std::vector<ggml_backend_reg *> builtin_regs();
// Registers what the environment asks for beyond the built-in families
// (remote servers named in LOOM_RPC_SERVERS); called once, after the
// registry exists, and may register families itself. Defined beside
// builtin_regs.
void builtin_from_environment();

class Registry {
  public:
    static Registry & get();

    // Adds a reg that lives in the process (built in, or registered by the
    // user) and its devices; a reg already present is ignored.
    void add_reg(ggml_backend_reg * reg);

    enum class AddResult { added, already_present, name_taken };
    // Adds a reg that came from library, which the registry keeps open while
    // the reg is registered. Unless added, the library is left to the caller.
    AddResult add_loaded(ggml_backend_reg * reg, SharedLibrary & library);

    void add_dev(ggml_backend_device * dev);

    // Removes reg and its devices; returns its library (empty for a reg
    // that did not come from one). false when reg is not registered.
    bool remove(ggml_backend_reg * reg, SharedLibrary * library);

    std::vector<ggml_backend_reg *>    regs();
    std::vector<ggml_backend_device *> devs();

  private:
    Registry();
    ~Registry();

    struct Entry {
        ggml_backend_reg * reg;
        SharedLibrary      library;
    };

    void add_locked(ggml_backend_reg * reg, SharedLibrary library);

    std::mutex                         mutex_;
    std::vector<Entry>                 entries_;
    std::vector<ggml_backend_device *> devs_;
};

} // namespace loom
