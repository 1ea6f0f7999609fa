#pragma once

// Copies of loom's tensors and graphs for the plugin (Note [Foreign handles]
// in hosted.h). A shadow tensor has the fields of the tensor it copies,
// except that its buffer is the plugin's buffer behind the loom one (NULL
// when the tensor is in no buffer of the plugin), its extra is the plugin's
// (kept in the loom tensor's extra field by HostedBuffer::init_tensor) and
// its src / view_src point at other shadows.

#include <cstddef>
#include <cstdint>
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
// source and view source, with ggml's hash set of them, the use counts of
// the loom graph and a uid (Note [Shadow graphs] in shadow.cpp). Built again
// for every computation of a loom graph; the shadows keep their addresses
// while the loom graph keeps its tensors.
class ShadowGraph {
  public:
    // false, with *why set, when a tensor of the graph lies in a buffer that
    // is not the plugin's.
    bool build(const ggml_cgraph * graph, const HostedReg & reg, std::string * why);

    ggml_abi::CGraph * get() { return &graph_; }

    // When it was last built, in the backend's count of computations.
    uint64_t last_use = 0;

  private:
    int  collect(const ggml_tensor * t);
    void insert(ggml_tensor * t);
    size_t slot(const ggml_tensor * t) const;

    // The loom tensors behind the shadows, in the order of their slots, and
    // for each the slots of its sources and view source (-1: none): what
    // decides whether a build gave the same shadows as the one before.
    std::vector<const ggml_tensor *>                     origs_;
    std::vector<int>                                     links_;
    std::vector<const ggml_tensor *>                     prev_origs_;
    std::vector<int>                                     prev_links_;
    std::unordered_map<const ggml_tensor *, int>         index_;
    std::vector<ggml_tensor>                             tensors_;
    std::vector<ggml_tensor *>                           nodes_;
    std::vector<ggml_tensor *>                           leafs_;
    std::vector<ggml_tensor *>                           keys_;
    std::vector<uint32_t>                                used_;
    std::vector<int32_t>                                 use_counts_;
    uint64_t                                             loom_uid_ = 0;
    ggml_abi::CGraph                                     graph_{};
};

} // namespace loom::ggml_plugin
