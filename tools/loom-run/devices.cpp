#include "devices.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace loom_run {

std::vector<std::string> split_list(std::string_view text) {
    std::vector<std::string> parts;
    size_t                   start = 0;
    while (start <= text.size()) {
        size_t end = text.find(',', start);
        if (end == std::string_view::npos) {
            end = text.size();
        }
        if (end > start) {
            parts.emplace_back(text.substr(start, end - start));
        }
        start = end + 1;
    }
    return parts;
}

namespace {

bool same_name(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

const char * type_name(enum ggml_backend_dev_type type) {
    switch (type) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return "CPU";
        case GGML_BACKEND_DEVICE_TYPE_GPU: return "GPU";
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return "IGPU";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "ACCEL";
        case GGML_BACKEND_DEVICE_TYPE_META: return "META";
    }
    return "?";
}

// A device by its name, or else the first device of a family of that name.
ggml_backend_dev_t lookup(const std::string & name) {
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (same_name(ggml_backend_dev_name(dev), name)) {
            return dev;
        }
    }
    ggml_backend_reg_t reg = ggml_backend_reg_by_name(name.c_str());
    if (reg != nullptr && ggml_backend_reg_dev_count(reg) > 0) {
        return ggml_backend_reg_dev_get(reg, 0);
    }
    return nullptr;
}

std::string known_devices() {
    std::string s;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        s += i == 0 ? "" : ", ";
        s += ggml_backend_dev_name(ggml_backend_dev_get(i));
    }
    return s.empty() ? "none" : s;
}

} // namespace

bool add_rpc_servers(const std::vector<std::string> & endpoints, const std::string & backend,
                     std::vector<ggml_backend_dev_t> * added, std::string * error) {
    if (endpoints.empty()) {
        return true;
    }
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name(backend.c_str());
    using add_server_t     = ggml_backend_reg_t (*)(const char *);
    auto add = rpc != nullptr ? reinterpret_cast<add_server_t>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"))
                              : nullptr;
    if (add == nullptr) {
        *error = rpc == nullptr ? "--rpc: there is no backend named " + backend +
                                      (backend == "RPC" ? " (this build has no RPC backend)" : " (is its plugin loaded?)")
                                : "--rpc: the backend " + backend + " does not offer ggml_backend_rpc_add_server";
        return false;
    }
    for (const std::string & endpoint : endpoints) {
        ggml_backend_reg_t reg = add(endpoint.c_str());
        if (reg == nullptr) {
            *error = "--rpc: cannot use the server at " + endpoint + " (the reason is logged above)";
            return false;
        }
        for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
            ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, i);
            if (std::find(added->begin(), added->end(), dev) == added->end()) {
                added->push_back(dev);
            }
        }
    }
    return true;
}

std::unique_ptr<Backends> Backends::create(const std::vector<std::string> & names,
                                           const std::vector<std::string> & plugin_paths, int n_threads,
                                           std::string * error, const std::vector<std::string> & rpc_servers,
                                           const std::string & rpc_backend) {
    ggml_backend_load_all();
    for (const std::string & path : plugin_paths) {
        if (ggml_backend_load(path.c_str()) == nullptr) {
            *error = "cannot load the backend plugin " + path + " (the reason is logged above)";
            return nullptr;
        }
    }

    std::vector<ggml_backend_dev_t> remote;
    if (!add_rpc_servers(rpc_servers, rpc_backend, &remote, error)) {
        return nullptr;
    }

    std::unique_ptr<Backends> b(new Backends());
    ggml_backend_dev_t        cpu = nullptr;
    if (names.empty()) {
        b->devices_ = remote;
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
            ggml_backend_dev_t dev = ggml_backend_dev_get(i);
            if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_ACCEL) {
                b->devices_.push_back(dev);
            }
        }
    }
    for (const std::string & name : names) {
        ggml_backend_dev_t dev = lookup(name);
        if (dev == nullptr) {
            *error = "no device named '" + name + "' (devices: " + known_devices() + ")";
            return nullptr;
        }
        if (std::find(b->devices_.begin(), b->devices_.end(), dev) != b->devices_.end() || dev == cpu) {
            *error = "device " + std::string(ggml_backend_dev_name(dev)) + " is listed twice";
            return nullptr;
        }
        // The scheduler wants the CPU last; it is the fallback for every op.
        if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU && cpu == nullptr) {
            cpu = dev;
        } else {
            b->devices_.push_back(dev);
        }
    }
    if (cpu == nullptr) {
        cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (cpu == nullptr) {
            *error = "no CPU device is registered";
            return nullptr;
        }
    }
    b->devices_.push_back(cpu);

    for (ggml_backend_dev_t dev : b->devices_) {
        ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
        if (backend == nullptr) {
            *error = "cannot start a backend on device " + std::string(ggml_backend_dev_name(dev));
            return nullptr;
        }
        b->backends_.push_back(backend);
    }
    if (n_threads > 0) {
        b->set_n_threads(n_threads);
    }
    return b;
}

bool Backends::combine_for_tensor_split(ggml_backend_meta_get_split_state_t get_split_state, void * userdata,
                                        std::string * error) {
    // Devices whose memory is the CPU's (BLAS) add nothing to a split of
    // the tensors, as in llama.cpp: they are left out, with a note.
    std::vector<ggml_backend_dev_t> members;
    for (auto it = devices_.begin(); it != devices_.end() - 1; ++it) {
        if (ggml_backend_dev_buffer_type(*it) == ggml_backend_cpu_buffer_type()) {
            std::fprintf(stderr, "loom-run: --split-mode tensor leaves out %s (it computes in the CPU's memory)\n",
                         ggml_backend_dev_name(*it));
            continue;
        }
        members.push_back(*it);
    }
    if (members.size() < 2) {
        *error = "--split-mode tensor needs at least two devices besides the CPU and CPU-memory devices in --device";
        return false;
    }
    ggml_backend_dev_t meta    = ggml_backend_meta_device(members.data(), members.size(), get_split_state, userdata);
    ggml_backend_t     backend = ggml_backend_dev_init(meta, nullptr);
    if (backend == nullptr) {
        *error = "cannot start a backend on " + std::string(ggml_backend_dev_name(meta));
        return false;
    }
    for (size_t i = 0; i + 1 < backends_.size(); ++i) {
        ggml_backend_free(backends_[i]);
    }
    devices_    = {meta, devices_.back()};
    backends_   = {backend, backends_.back()};
    n_members_  = members.size();
    return true;
}

void Backends::set_n_threads(int n_threads) {
    for (size_t i = 0; i < devices_.size(); ++i) {
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(devices_[i]);
        if (reg == nullptr) continue; // a meta device: its members keep their own counts
        auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
            ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
        if (set_threads != nullptr) {
            set_threads(backends_[i], n_threads);
        }
    }
}

Backends::~Backends() {
    for (ggml_backend_t backend : backends_) {
        ggml_backend_free(backend);
    }
}

int Backends::find(std::string_view name) const {
    for (size_t i = 0; i < devices_.size(); ++i) {
        if (same_name(ggml_backend_dev_name(devices_[i]), name)) {
            return int(i);
        }
    }
    // A family name stands for the first of its devices in the list.
    for (size_t i = 0; i < devices_.size(); ++i) {
        if (same_name(ggml_backend_reg_name(ggml_backend_dev_backend_reg(devices_[i])), name)) {
            return int(i);
        }
    }
    return -1;
}

bool assign_layers(const Backends & backends, int n_layer, const std::vector<std::pair<std::string, int>> & layers_on,
                   std::vector<int> * layer_device, std::string * error) {
    const int cpu = int(backends.cpu_index());
    layer_device->assign(size_t(std::max(n_layer, 0)), cpu);

    // Layer counts per device index; -1 where none was given.
    std::vector<int> count(backends.size(), -1);
    for (const auto & [name, n] : layers_on) {
        const int i = backends.find(name);
        if (i < 0) {
            *error = "--layers-on names device '" + name + "', which is not among the devices in use";
            return false;
        }
        count[size_t(i)] = n;
    }
    if (layers_on.empty()) {
        std::vector<int> holders;
        for (size_t i = 0; i < backends.size(); ++i) {
            const auto type = ggml_backend_dev_type(backends.device(i));
            if (type != GGML_BACKEND_DEVICE_TYPE_CPU && type != GGML_BACKEND_DEVICE_TYPE_ACCEL) {
                holders.push_back(int(i));
            }
        }
        // Evenly, the first devices taking one more when it does not divide.
        const int n_holders = int(holders.size());
        for (int h = 0; h < n_holders; ++h) {
            count[size_t(holders[size_t(h)])] = n_layer / n_holders + (h < n_layer % n_holders ? 1 : 0);
        }
    }

    int next = 0;
    for (size_t i = 0; i < backends.size() && next < n_layer; ++i) {
        if (int(i) == cpu || count[i] <= 0) {
            continue;
        }
        const int n = std::min(count[i], n_layer - next);
        for (int l = next; l < next + n; ++l) {
            (*layer_device)[size_t(l)] = int(i);
        }
        next += n;
    }
    return true;
}

std::string backend_feature(ggml_backend_dev_t dev, std::string_view name) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    auto fn = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    for (const ggml_backend_feature * f = fn != nullptr ? fn(reg) : nullptr; f != nullptr && f->name != nullptr; ++f) {
        if (name == f->name) return f->value != nullptr ? f->value : "";
    }
    return "";
}

std::string describe_devices() {
    std::string s;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev   = ggml_backend_dev_get(i);
        size_t             free  = 0;
        size_t             total = 0;
        ggml_backend_dev_memory(dev, &free, &total);
        char line[512];
        std::snprintf(line, sizeof line, "  %-12s %-5s %s (%zu MiB free of %zu MiB)\n", ggml_backend_dev_name(dev),
                      type_name(ggml_backend_dev_type(dev)), ggml_backend_dev_description(dev), free >> 20,
                      total >> 20);
        s += line;
    }
    return s;
}

} // namespace loom_run
