#pragma once

// The meta device (ggml_backend_meta_device): several member devices acting
// as one. Its buffers hold one buffer per member, of the meta buffer's size,
// and each tensor placed in a meta buffer has one slice tensor per member at
// the same offset in that member's buffer. The split state of a tensor says
// which part of it each slice holds (split_state.cpp); the backend computes a
// graph as one graph of slices per member and sums partial results over the
// members (meta_backend.cpp).

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../backend_impl.h"

namespace loom::meta {

using SplitState = ggml_backend_meta_split_state;

bool         is_split_axis(int axis);
SplitState   mirrored_state();
// Elements along the split axis that member j holds (0 when not split).
int64_t      share(const SplitState & s, size_t n_devs, size_t j);
bool         same_shares(const SplitState & a, const SplitState & b, size_t n_devs);

class Device;
class Buffer;

// A tensor of a meta buffer: its state and its member slices.
struct Slices {
    SplitState                                state{};
    std::vector<std::unique_ptr<ggml_tensor>> parts;
    // Members whose slice takes part in the computation (a source with an
    // empty slice there turns it off).
    std::vector<bool> active;
    // The placed tensor's memory and shape.
    const void * data = nullptr;
    ggml_type    type = GGML_TYPE_F32;
    int64_t      ne[GGML_MAX_DIMS]{};
    size_t       nb[GGML_MAX_DIMS]{};
    const ggml_tensor * view_src  = nullptr;
    size_t              view_offs = 0;
    ggml_op             op        = GGML_OP_NONE;
    // Never reused: a tensor's slices are valid while its sources' serials
    // are those it was placed with.
    uint64_t serial = 0;
    uint64_t src_serials[GGML_MAX_SRC]{};

    // Whether t still has the memory and shape these slices were made for.
    bool matches(const ggml_tensor * t) const;
};

// The state a tensor of a meta buffer has as a source: a computed partial sum
// is summed over the members right after it is computed, so it is read as
// mirrored.
const Slices * slices_of(const ggml_tensor * t);
SplitState     state_as_source(const ggml_tensor * t);

// The state of a split tensor of extents ne_in read as extents ne_out (same
// element order), or UNKNOWN with why in reason.
SplitState reshape_state(const SplitState & s, const int64_t * ne_in, const int64_t * ne_out, size_t n_devs,
                         std::string & reason);

// The state of t from the states of its sources, or UNKNOWN with why in reason.
SplitState derive_state(const ggml_tensor * t, size_t n_devs, std::string & reason);

class BufferType final : public ggml_backend_buffer_type {
  public:
    BufferType(Device * dev, std::vector<ggml_backend_buffer_type *> members);

    const char *          name() const override { return name_.c_str(); }
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    size_t                alignment() const override;
    size_t                max_size() const override;
    size_t                alloc_size(const ggml_tensor * t) const override;
    // Never host memory: a tensor's data is an offset, not an address.
    bool is_host() const override { return false; }
    // init_tensor places each tensor's slices in the members.
    bool needs_init_tensor() const override { return true; }

    const std::vector<ggml_backend_buffer_type *> & members() const { return members_; }

  private:
    std::vector<ggml_backend_buffer_type *> members_;
    std::string                             name_;
};

class Buffer final : public ggml_backend_buffer {
  public:
    Buffer(BufferType * type, size_t size, std::vector<ggml_backend_buffer *> members);
    ~Buffer() override;

    void *      base() override;
    ggml_status init_tensor(ggml_tensor * t) override;
    void        set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override;
    void        get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override;
    void        memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override;
    void        clear(uint8_t value) override;
    void        reset() override;
    void        set_usage(ggml_backend_buffer_usage u) override;

    // The slices of t; a view not placed yet (views the scheduler gives
    // their source's memory directly) is placed now. NULL when t cannot be placed.
    const Slices *                             find(const ggml_tensor * t);
    // The entry of t as it is, unchecked against its sources.
    const Slices *                             peek(const ggml_tensor * t) const;
    const std::vector<ggml_backend_buffer *> & members() const { return members_; }
    Device *                                   meta_device() const;

  private:
    // t's root when t is a view of a tensor placed in this buffer.
    ggml_tensor * root_in_this_buffer(const ggml_tensor * t);

    std::vector<ggml_backend_buffer *>                    members_;
    std::unordered_map<const ggml_tensor *, Slices>       tensors_;
};

class Device final : public ggml_backend_device {
  public:
    Device(std::vector<ggml_backend_device *> members, ggml_backend_meta_get_split_state_t get_split_state,
           void * userdata);

    const char *               name() const override { return name_.c_str(); }
    const char *               description() const override { return description_.c_str(); }
    void                       memory(size_t * free, size_t * total) const override;
    ggml_backend_dev_caps      caps() const override;
    enum ggml_backend_dev_type type() const override { return GGML_BACKEND_DEVICE_TYPE_META; }
    ggml_backend *             init_backend(const char * params) override;
    ggml_backend_buffer_type * buffer_type() override { return &buft_; }
    ggml_backend_buffer_type * host_buffer_type() override;
    bool                       supports_op(const ggml_tensor * op) const override;
    bool                       supports_buft(const ggml_backend_buffer_type * buft) const override;

    size_t                                     n_members() const { return members_.size(); }
    const std::vector<ggml_backend_device *> & members() const { return members_; }
    SplitState ask_split_state(const ggml_tensor * t) const { return get_split_state_(t, userdata_); }

  private:
    std::vector<ggml_backend_device *>  members_;
    ggml_backend_meta_get_split_state_t get_split_state_;
    void *                              userdata_;
    std::string                         name_;
    std::string                         description_;
    BufferType                          buft_;
};

bool is_meta_buffer(const ggml_backend_buffer * b);

} // namespace loom::meta
