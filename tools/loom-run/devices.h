#pragma once

// The devices a run uses: looked up by name in the backend registry, each
// with a backend (stream), in the scheduler's priority order with the CPU
// last; and which transformer layer runs on which of them.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ggml-backend.h"

namespace loom_run {

// A comma-separated list of names, empty items dropped: "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(std::string_view text);

// The value of a feature that dev's reg reports (ggml_backend_get_features),
// or "" when it reports none of that name.
std::string backend_feature(ggml_backend_dev_t dev, std::string_view name);

class Backends {
  public:
    // Loads the backend plugins that ggml_backend_load_all finds and those at
    // plugin_paths, then starts a backend on each named device (device names,
    // or a backend family's name for its first device; case-insensitive).
    // names empty: the accelerators (BLAS and the like), then the CPU. The CPU
    // device is always last, added when missing. n_threads > 0 is given to
    // every backend that takes a thread count. Returns NULL with *error set
    // when a plugin cannot be loaded, a name matches no device, or a device
    // appears twice or fails to start. rpc_servers ("host:port") are
    // connected first (ggml_backend_rpc_add_server); their devices lead the
    // default list; a server that cannot be reached is an error.
    static std::unique_ptr<Backends> create(const std::vector<std::string> & names,
                                            const std::vector<std::string> & plugin_paths, int n_threads,
                                            std::string * error, const std::vector<std::string> & rpc_servers = {},
                                            const std::string & rpc_backend = "RPC");
    ~Backends();
    Backends(const Backends &)             = delete;
    Backends & operator=(const Backends &) = delete;

    size_t             size() const { return devices_.size(); }
    size_t             cpu_index() const { return devices_.size() - 1; }
    ggml_backend_dev_t device(size_t i) const { return devices_.at(i); }
    ggml_backend_t     backend(size_t i) const { return backends_.at(i); }
    const char *       name(size_t i) const { return ggml_backend_dev_name(devices_.at(i)); }
    // For ggml_backend_sched_new.
    ggml_backend_t *   data() { return backends_.data(); }
    // Index of the device with that name (case-insensitive), or -1.
    int                find(std::string_view name) const;
    // --split-mode tensor: replaces the devices other than the CPU (at least
    // two) by one meta device over them, with get_split_state(userdata)
    // (userdata must outlive the backends). False with *error set when there
    // are fewer than two or the meta backend cannot start.
    bool               combine_for_tensor_split(ggml_backend_meta_get_split_state_t get_split_state, void * userdata,
                                                std::string * error);
    // Members of the meta device after combine_for_tensor_split (else 0).
    size_t             n_members() const { return n_members_; }
    // Gives n_threads to every backend that takes a thread count.
    void               set_n_threads(int n_threads);

  private:
    Backends() = default;

    std::vector<ggml_backend_dev_t> devices_;
    std::vector<ggml_backend_t>     backends_;
    size_t                          n_members_ = 0;
};

// The device index (into backends) of each of n_layer layers. layers_on
// gives layer counts per device name, assigned from layer 0 in the order of
// the devices; layers left over run on the CPU. Without any count, the layers
// are shared evenly by the devices that are neither the CPU nor accelerators
// (all on the CPU when there are none). Counts adding up to more than
// n_layer are cut at n_layer. Returns false with *error set for a name that
// is not among the devices.
bool assign_layers(const Backends & backends, int n_layer, const std::vector<std::pair<std::string, int>> & layers_on,
                   std::vector<int> * layer_device, std::string * error);

// Connects to each server and registers its devices; appends them to added.
// False with *error set when the RPC family is not there or a server fails;
// backend names the family whose ggml_backend_rpc_add_server connects.
bool add_rpc_servers(const std::vector<std::string> & endpoints, const std::string & backend,
                     std::vector<ggml_backend_dev_t> * added, std::string * error);

// One line per registered device: name, type, description, memory.
std::string describe_devices();

} // namespace loom_run
