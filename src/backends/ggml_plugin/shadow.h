#pragma once

// Copies of loom's tensors and graphs for the plugin (Note [Foreign handles]
// in hosted.h). A shadow tensor has the fields of the tensor it copies,
// except that its buffer is the plugin's buffer behind the loom one (NULL
// when the tensor is in no buffer of the plugin), its extra is the plugin's
// (kept in the loom tensor's extra field by HostedBuffer::init_tensor) and
// its src / view_src point at other shadows.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "abi.h"

namespace loom::ggml_plugin {

class HostedReg;

// One tensor for a single call (a buffer function, supports_op,
// get_alloc_size), with its view source and, when asked, its sources and
// their view sources; sources of sources are cleared.
class TensorShadow {
  public:
    TensorShadow(const ggml_tensor * t, const HostedReg & reg, bool with_srcs);
    TensorShadow(const TensorShadow &)             = delete;
    TensorShadow & operator=(const TensorShadow &) = delete;

    ggml_tensor * get() { return &tensors_[0]; }

  private:
    ggml_tensor * add(const ggml_tensor * t, const HostedReg & reg);

    // The tensor, up to GGML_MAX_SRC sources and a view source for each.
    ggml_tensor tensors_[2 + 2 * GGML_MAX_SRC];
    size_t      n_ = 0;
};

// A graph for the plugin's graph_compute: shadows of every node, leaf,
// source and view source, with ggml's hash set of them and use counts
// (Note [Use counts of shadow graphs] in shadow.cpp).
class ShadowGraph {
  public:
    // false, with *why set, when a tensor of the graph lies in a buffer that
    // is not the plugin's.
    bool build(const ggml_cgraph * graph, const HostedReg & reg, std::string * why);

    ggml_abi::CGraph * get() { return &graph_; }

  private:
    ggml_tensor * shadow(const ggml_tensor * t);
    void          insert(ggml_tensor * t);
    size_t        slot(const ggml_tensor * t) const;

    const HostedReg *                                          reg_ = nullptr;
    std::string                                                error_;
    std::deque<ggml_tensor>                                    tensors_;
    std::unordered_map<const ggml_tensor *, ggml_tensor *>     map_;
    std::vector<ggml_tensor *>                                 nodes_;
    std::vector<ggml_tensor *>                                 leafs_;
    std::vector<ggml_tensor *>                                 keys_;
    std::vector<uint32_t>                                      used_;
    std::vector<int32_t>                                       use_counts_;
    ggml_abi::CGraph                                           graph_{};
};

} // namespace loom::ggml_plugin
