// A Vulkan backend: a stream of command buffers on the device's queue.
//
// Work is recorded into the current batch (a command buffer with its
// staging memory, parameter blocks and descriptor sets) and submitted at the
// end of each graph, at an event record and at synchronize. Each submission
// signals the next value of the stream's timeline semaphore; a batch's
// resources return to the free lists once the semaphore passes its value.
// Host transfers go through staging memory: uploads are copied into it
// when they are queued, downloads are copied out of it when their batch is
// found complete (at the latest in synchronize).

#include <algorithm>
#include <cstring>
#include <deque>
#include <new>
#include <optional>

#include "core/common.h"
#include "core/indices.h"
#include "ggml-vulkan.h"
#include "vk_impl.h"

namespace loom::vk {

namespace {

ggml_guid g_vk_guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x76, 0x75, 0x6c,
                       0x6b, 0x61, 0x6e, 0x9a, 0x41, 0x0c, 0x5e, 0x27};

bool is_noop(const ggml_tensor * t) {
    return t->op == GGML_OP_NONE || loom::is_view_op(t->op) || ggml_is_empty(t);
}

constexpr uint32_t k_sets_per_pool   = 256;
constexpr size_t   k_min_chunk_bytes = size_t(4) << 20;

struct Range {
    VkBuffer buffer;
    size_t   begin, end;
    bool     overlaps(const Range & o) const { return buffer == o.buffer && begin < o.end && o.begin < end; }
};

class Stream final : public ggml_backend {
  public:
    explicit Stream(Device * dev) : ggml_backend(&g_vk_guid, dev), dev_(dev) { ++dev_->live; }

    bool init() {
        VkCommandPoolCreateInfo cpci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
        cpci.flags            = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
        cpci.queueFamilyIndex = dev_->queue_family();
        VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
        tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
        VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
        sci.pNext = &tci;
        if (vkCreateCommandPool(vk(), &cpci, nullptr, &pool_) != VK_SUCCESS) {
            pool_ = VK_NULL_HANDLE;
            return false;
        }
        if (vkCreateSemaphore(vk(), &sci, nullptr, &timeline_) != VK_SUCCESS) {
            timeline_ = VK_NULL_HANDLE;
            return false;
        }
        return true;
    }

    ~Stream() override {
        if (timeline_ != VK_NULL_HANDLE) {
            synchronize();
        }
        if (cur_) {
            recycle(*cur_);
        }
        for (Allocation & a : free_chunks_) dev_->destroy_buffer(a);
        for (VkDescriptorPool p : free_pools_) vkDestroyDescriptorPool(vk(), p, nullptr);
        if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(vk(), pool_, nullptr); // frees the command buffers
        if (timeline_ != VK_NULL_HANDLE) vkDestroySemaphore(vk(), timeline_, nullptr);
        --dev_->live;
    }

    const char * name() const override { return dev_->name(); }

    void set_tensor_async(ggml_tensor * t, const void * data, size_t offset, size_t n) override {
        Location to;
        if (!locate(dev_, t, true, &to)) {
            synchronize();
            ggml_backend_tensor_set(t, data, offset, n);
            return;
        }
        Location pinned;
        if (dev_->find_pinned(data, n, &pinned) && batch()) {
            // Read when the copy runs: ggml's async contract keeps data valid until synchronize.
            const VkBufferCopy c{VkDeviceSize(pinned.offset), VkDeviceSize(to.offset + offset), VkDeviceSize(n)};
            vkCmdCopyBuffer(cur_->cb, pinned.buffer, to.buffer, 1, &c);
            full_barrier(cur_->cb);
            return;
        }
        Staged s;
        if (!stage(n, 16, &s)) {
            return;
        }
        std::memcpy(s.mapped, data, n);
        const VkBufferCopy c{VkDeviceSize(s.offset), VkDeviceSize(to.offset + offset), VkDeviceSize(n)};
        vkCmdCopyBuffer(cur_->cb, s.buffer, to.buffer, 1, &c);
        full_barrier(cur_->cb);
    }

    void get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) override {
        Location from;
        if (!locate(dev_, t, true, &from)) {
            synchronize();
            ggml_backend_tensor_get(t, data, offset, n);
            return;
        }
        Location pinned;
        if (dev_->find_pinned(data, n, &pinned) && batch()) {
            const VkBufferCopy c{VkDeviceSize(from.offset + offset), VkDeviceSize(pinned.offset), VkDeviceSize(n)};
            vkCmdCopyBuffer(cur_->cb, from.buffer, pinned.buffer, 1, &c);
            full_barrier(cur_->cb);
            return;
        }
        Staged s;
        if (!stage(n, 16, &s)) {
            return;
        }
        const VkBufferCopy c{VkDeviceSize(from.offset + offset), VkDeviceSize(s.offset), VkDeviceSize(n)};
        vkCmdCopyBuffer(cur_->cb, from.buffer, s.buffer, 1, &c);
        full_barrier(cur_->cb);
        cur_->reads.push_back({data, s.mapped, n});
    }

    bool cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) override {
        Location to, from;
        if (!locate(dev_, dst, true, &to)) {
            return false;
        }
        const size_t                n      = ggml_nbytes(src);
        const ggml_backend_buffer * src_bb = src->view_src != nullptr ? src->view_src->buffer : src->buffer;
        if (locate(dev_, src, true, &from)) {
            // Device to device: the source stream's work must be submitted
            // first (Note [One queue] orders it before ours).
            if (backend_src != nullptr && backend_src != this) {
                backend_src->synchronize();
            }
            batch();
            const VkBufferCopy c{VkDeviceSize(from.offset), VkDeviceSize(to.offset), VkDeviceSize(n)};
            vkCmdCopyBuffer(cur_->cb, from.buffer, to.buffer, 1, &c);
            full_barrier(cur_->cb);
            return true;
        }
        if (src_bb != nullptr && src_bb->buft->is_host() && src->data != nullptr) {
            // Host memory may be reused once this returns: stage it now.
            if (backend_src != nullptr && backend_src != this) {
                backend_src->synchronize();
            }
            Staged s;
            if (!stage(n, 16, &s)) {
                return false;
            }
            std::memcpy(s.mapped, src->data, n);
            const VkBufferCopy c{VkDeviceSize(s.offset), VkDeviceSize(to.offset), VkDeviceSize(n)};
            vkCmdCopyBuffer(cur_->cb, s.buffer, to.buffer, 1, &c);
            full_barrier(cur_->cb);
            return true;
        }
        return false;
    }

    void synchronize() override {
        flush(nullptr);
        retire(true);
    }

    void event_record(ggml_backend_event * event) override {
        auto * e = static_cast<Event *>(event);
        ++e->value;
        flush(e);
    }

    void event_wait(ggml_backend_event * event) override {
        if (event->device != device) {
            // Another device's event: a semaphore cannot cross devices, wait here.
            event->device->event_synchronize(event);
            return;
        }
        auto * e = static_cast<Event *>(event);
        if (e->value == 0) {
            return;
        }
        flush(nullptr); // the work queued so far need not wait
        waits_.push_back({e->sem, e->value});
    }

    ggml_status graph_compute(ggml_cgraph * graph) override;

  private:
    struct Staged {
        VkBuffer buffer;
        size_t   offset;
        void *   mapped;
    };
    // An index source of a node, checked on the device before the node runs
    // (Note [Indices from data]); entry: its entry in a check's table.
    struct Check {
        size_t              index; // of the node in the graph's computed nodes
        const ggml_tensor * node;
        int                 src;
        Location            at;      // the source's memory
        bool                hoisted; // checked at the start of the graph
        const IndexEntry *  entry = nullptr;
    };

    // Shader writes before, shader reads and writes (and extra) after.
    void compute_barrier(VkPipelineStageFlags extra_stage, VkAccessFlags extra_access);
    // Records d with buffers bound to slots 0..3 (the parameter block staged
    // here); with args, an indirect dispatch whose counts the host writes
    // into slot `slot` of args.
    ggml_status record(const Dispatch & d, const VkBuffer (&buffers)[k_tensor_slots], const Staged * args, size_t slot,
                       VkPipeline * bound);
    // Records one check of the sources of checks (all in one buffer), whose
    // entries zero[k] = {first slot, slots} of args say what to skip.
    ggml_status record_check(const std::vector<Check *> & checks, const std::vector<std::pair<size_t, size_t>> & zero,
                             const Staged & args, const Staged * indirect, size_t slot, VkPipeline * bound);
    ggml_status finish_checked(const std::vector<Check> & checks);

    struct Read {
        void *       to;
        const void * from;
        size_t       n;
    };
    struct Batch {
        VkCommandBuffer               cb = VK_NULL_HANDLE;
        uint64_t                      value = 0;
        std::vector<Allocation>       chunks;
        size_t                        chunk_used = 0;
        std::vector<VkDescriptorPool> pools;
        uint32_t                      sets_left = 0;
        std::vector<Read>             reads;
    };
    VkDevice vk() const { return dev_->vk(); }

    // The batch being recorded, begun if there is none.
    bool batch() {
        if (cur_) {
            return true;
        }
        Batch b;
        if (!free_cbs_.empty()) {
            b.cb = free_cbs_.back();
            free_cbs_.pop_back();
        } else {
            VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
            ai.commandPool        = pool_;
            ai.level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
            ai.commandBufferCount = 1;
            if (vkAllocateCommandBuffers(vk(), &ai, &b.cb) != VK_SUCCESS) {
                LOOM_LOG_ERROR("%s: cannot allocate a command buffer\n", name());
                return false;
            }
        }
        VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        vkBeginCommandBuffer(b.cb, &bi);
        full_barrier(b.cb); // Note [One queue]
        cur_ = std::move(b);
        return true;
    }

    // n bytes of mapped staging memory in the current batch.
    bool stage(size_t n, size_t align, Staged * out) {
        if (!batch()) {
            return false;
        }
        Batch & b   = *cur_;
        size_t  off = (b.chunk_used + align - 1) / align * align;
        if (b.chunks.empty() || off + n > b.chunks.back().size) {
            auto it = std::find_if(free_chunks_.begin(), free_chunks_.end(),
                                   [n](const Allocation & a) { return a.size >= n; });
            Allocation a;
            if (it != free_chunks_.end()) {
                a = *it;
                free_chunks_.erase(it);
            } else if (!dev_->create_buffer(std::max(n, k_min_chunk_bytes), true, &a)) {
                LOOM_LOG_ERROR("%s: out of staging memory for %zu bytes\n", name(), n);
                return false;
            }
            b.chunks.push_back(a);
            off = 0;
        }
        b.chunk_used = off + n;
        out->buffer  = b.chunks.back().buffer;
        out->offset  = off;
        out->mapped  = static_cast<char *>(b.chunks.back().mapped) + off;
        return true;
    }

    VkDescriptorSet descriptor_set() {
        Batch & b = *cur_;
        if (b.sets_left == 0) {
            VkDescriptorPool p = VK_NULL_HANDLE;
            if (!free_pools_.empty()) {
                p = free_pools_.back();
                free_pools_.pop_back();
            } else {
                VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, k_sets_per_pool * (1 + k_tensor_slots)};
                VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
                pci.maxSets       = k_sets_per_pool;
                pci.poolSizeCount = 1;
                pci.pPoolSizes    = &size;
                if (vkCreateDescriptorPool(vk(), &pci, nullptr, &p) != VK_SUCCESS) {
                    return VK_NULL_HANDLE;
                }
            }
            b.pools.push_back(p);
            b.sets_left = k_sets_per_pool;
        }
        VkDescriptorSetLayout       layout = dev_->set_layout();
        VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool     = b.pools.back();
        ai.descriptorSetCount = 1;
        ai.pSetLayouts        = &layout;
        VkDescriptorSet set   = VK_NULL_HANDLE;
        if (vkAllocateDescriptorSets(vk(), &ai, &set) != VK_SUCCESS) {
            return VK_NULL_HANDLE;
        }
        --b.sets_left;
        return set;
    }

    // Submits the current batch (an empty one when only an event is to be
    // signalled) with the pending waits.
    void flush(Event * signal) {
        if (!cur_ && signal == nullptr && waits_.empty()) {
            retire(false);
            return;
        }
        if (!batch()) {
            return;
        }
        Batch b = std::move(*cur_);
        cur_.reset();
        vkEndCommandBuffer(b.cb);
        b.value = ++submitted_;

        std::vector<VkSemaphore>          signal_sems{timeline_};
        std::vector<uint64_t>             signal_values{b.value};
        std::vector<VkSemaphore>          wait_sems;
        std::vector<uint64_t>             wait_values;
        std::vector<VkPipelineStageFlags> wait_stages;
        if (signal != nullptr) {
            signal_sems.push_back(signal->sem);
            signal_values.push_back(signal->value);
        }
        for (const auto & [s, v] : waits_) {
            wait_sems.push_back(s);
            wait_values.push_back(v);
            wait_stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
        }
        waits_.clear();
        VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
        ti.waitSemaphoreValueCount   = uint32_t(wait_values.size());
        ti.pWaitSemaphoreValues      = wait_values.data();
        ti.signalSemaphoreValueCount = uint32_t(signal_values.size());
        ti.pSignalSemaphoreValues    = signal_values.data();
        VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        si.pNext                = &ti;
        si.waitSemaphoreCount   = uint32_t(wait_sems.size());
        si.pWaitSemaphores      = wait_sems.data();
        si.pWaitDstStageMask    = wait_stages.data();
        si.commandBufferCount   = 1;
        si.pCommandBuffers      = &b.cb;
        si.signalSemaphoreCount = uint32_t(signal_sems.size());
        si.pSignalSemaphores    = signal_sems.data();
        const VkResult r        = dev_->submit(si, VK_NULL_HANDLE);
        if (r != VK_SUCCESS) {
            LOOM_LOG_ERROR("%s: vkQueueSubmit failed (VkResult %d)\n", name(), int(r));
            --submitted_;
            recycle(b);
            return;
        }
        inflight_.push_back(std::move(b));
        retire(false);
    }

    // Finishes the batches the device has completed (all of them with wait).
    void retire(bool wait) {
        if (inflight_.empty()) {
            return;
        }
        if (wait) {
            VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
            wi.semaphoreCount = 1;
            wi.pSemaphores    = &timeline_;
            wi.pValues        = &submitted_;
            if (vkWaitSemaphores(vk(), &wi, UINT64_MAX) != VK_SUCCESS) {
                LOOM_LOG_ERROR("%s: waiting for the queue failed (device lost?)\n", name());
            }
        }
        uint64_t done = 0;
        vkGetSemaphoreCounterValue(vk(), timeline_, &done);
        while (!inflight_.empty() && inflight_.front().value <= done) {
            Batch & b = inflight_.front();
            for (const Read & r : b.reads) {
                std::memcpy(r.to, r.from, r.n);
            }
            recycle(b);
            inflight_.pop_front();
        }
    }

    void recycle(Batch & b) {
        vkResetCommandBuffer(b.cb, 0);
        free_cbs_.push_back(b.cb);
        for (const Allocation & a : b.chunks) free_chunks_.push_back(a);
        for (VkDescriptorPool p : b.pools) {
            vkResetDescriptorPool(vk(), p, 0);
            free_pools_.push_back(p);
        }
        b = Batch{};
    }

    Device *                                      dev_;
    VkCommandPool                                 pool_     = VK_NULL_HANDLE;
    VkSemaphore                                   timeline_ = VK_NULL_HANDLE;
    uint64_t                                      submitted_ = 0;
    std::optional<Batch>                          cur_;
    std::deque<Batch>                             inflight_;
    std::vector<VkCommandBuffer>                  free_cbs_;
    std::vector<Allocation>                       free_chunks_;
    std::vector<VkDescriptorPool>                 free_pools_;
    std::vector<std::pair<VkSemaphore, uint64_t>> waits_;
};

// Note [Indices from data]
// GET_ROWS and SET_ROWS read row numbers from a tensor, so a number outside
// the rows is a data problem: the graph stops at that node with
// GGML_STATUS_FAILED, the node and every node after it keep their bytes,
// and the log names the value and where it was read (docs/errors.md,
// "Indices read from data"; Note [Index sources] in core/op_table.h).
//
// The indices may be computed by an earlier node of the same submission,
// so the host cannot look at them while it records; a shader checks them
// (shaders/check_indices.comp). From the first node with index sources on,
// every dispatch of the graph is vkCmdDispatchIndirect, its group counts in
// one array of host-visible staging memory that the host fills while
// recording. A check that finds a bad index zeroes the counts of its node
// and of everything after it, so they run no workgroup, and writes the
// first bad position into its entry of the check's table. A barrier after
// checks makes the counts and the node's inputs visible
// (VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT).
//
// Where a check runs: a source that no earlier node of the graph writes
// (positions, row ids: the graph's inputs) is checked at the start, all
// such sources of a buffer in one dispatch, followed by one barrier; a
// source an earlier node writes gets its own check just before its node,
// after that node's writer. The verdict is the same as checking each just
// before its node: nodes before the first bad one run, it and those after
// it do not. Each extra dispatch costs about as much as a small node on
// lavapipe, so a model's KV cache writes (two SET_ROWS a layer, reading the
// same input positions) pay for one check per graph instead of one per node.
//
// A graph with checks waits for its submission, then the host reads the
// entries in node order, and for the first that failed reads the bad value
// back from the index source (nothing after the check ran, so it is still
// there). Graphs without index sources record what they did before: direct
// dispatches, no wait. The shaders of GET_ROWS and SET_ROWS still skip a
// row outside the bound, so that no write could leave the tensor even if a
// check were wrong.
ggml_status Stream::graph_compute(ggml_cgraph * graph) {
    // Everything is checked before anything is recorded.
    std::vector<const ggml_tensor *> nodes;
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        const ggml_tensor * node = ggml_graph_node(graph, i);
        if (is_noop(node) || !(node->flags & GGML_TENSOR_FLAG_COMPUTE)) {
            continue;
        }
        if (!supports(node)) {
            LOOM_LOG_ERROR("%s: cannot compute %s (%s)\n", name(), describe(node).text, ggml_op_desc(node));
            return GGML_STATUS_FAILED;
        }
        Location loc;
        if (!locate(dev_, node, true, &loc)) {
            LOOM_LOG_ERROR("%s: %s is not in this device's memory\n", name(), describe(node).text);
            return GGML_STATUS_FAILED;
        }
        for (const ggml_tensor * s : node->src) {
            if (s != nullptr && !locate(dev_, s, true, &loc)) {
                LOOM_LOG_ERROR("%s: operand %s of %s is not in this device's memory\n", name(), describe(s).text,
                               describe(node).text);
                return GGML_STATUS_FAILED;
            }
        }
        nodes.push_back(node);
    }
    if (nodes.empty()) {
        return GGML_STATUS_SUCCESS;
    }

    // The index sources, in node order; a source no earlier node writes is
    // checked at the start.
    std::vector<Check> checks;
    std::vector<Range> dst;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const ggml_tensor * node = nodes[i];
        const uint8_t       srcs = index_srcs(node->op);
        for (int src = 0; src < GGML_MAX_SRC; ++src) {
            if ((srcs & (1u << src)) == 0 || node->src[src] == nullptr) {
                continue;
            }
            Check c{i, node, src, {}, true};
            locate(dev_, node->src[src], true, &c.at);
            const Range r{c.at.buffer, c.at.offset, c.at.offset + ggml_nbytes(node->src[src])};
            c.hoisted = std::none_of(dst.begin(), dst.end(), [&](const Range & w) { return w.overlaps(r); });
            checks.push_back(c);
        }
        Location at;
        locate(dev_, node, true, &at);
        dst.push_back({at.buffer, at.offset, at.offset + ggml_nbytes(node)});
    }
    // The indirect dispatches: from the first node with index sources on,
    // each node's checks that are not hoisted, then the node; first_slot[i]:
    // the first of node i's.
    const size_t        first_checked = checks.empty() ? nodes.size() : checks.front().index;
    std::vector<size_t> first_slot(nodes.size(), 0);
    size_t              n_indirect = 0;
    for (size_t i = first_checked, ci = 0; i < nodes.size(); ++i) {
        first_slot[i] = n_indirect;
        for (; ci < checks.size() && checks[ci].index == i; ++ci) {
            n_indirect += checks[ci].hoisted ? 0 : 1;
        }
        ++n_indirect;
    }
    if (!batch()) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    full_barrier(cur_->cb); // after the transfers queued before
    Staged args{};
    if (n_indirect > 0 && !stage(n_indirect * sizeof(VkDispatchIndirectCommand), 16, &args)) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    VkPipeline bound = VK_NULL_HANDLE;

    // The hoisted checks: one dispatch per buffer holding sources, then one
    // barrier.
    std::vector<bool> done(checks.size(), false);
    bool              any_hoisted = false;
    for (size_t k = 0; k < checks.size(); ++k) {
        if (!checks[k].hoisted || done[k]) {
            continue;
        }
        std::vector<Check *>                   group;
        std::vector<std::pair<size_t, size_t>> zero;
        for (size_t j = k; j < checks.size(); ++j) {
            if (checks[j].hoisted && checks[j].at.buffer == checks[k].at.buffer) {
                group.push_back(&checks[j]);
                zero.push_back({first_slot[checks[j].index], n_indirect - first_slot[checks[j].index]});
                done[j] = true;
            }
        }
        const ggml_status st = record_check(group, zero, args, nullptr, 0, &bound);
        if (st != GGML_STATUS_SUCCESS) {
            return st;
        }
        any_hoisted = true;
    }
    if (any_hoisted) {
        compute_barrier(VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
    }

    // Barriers only where a node touches what an earlier node since the
    // last barrier wrote, or writes what one read.
    std::vector<Range> written, read;
    size_t             next_arg = 0; // the next slot of args
    for (size_t i = 0, ci = 0; i < nodes.size(); ++i) {
        const ggml_tensor * node = nodes[i];
        // Sources an earlier node wrote: checked just before the node.
        for (; ci < checks.size() && checks[ci].index == i; ++ci) {
            Check & c = checks[ci];
            if (c.hoisted) {
                continue;
            }
            const Range r{c.at.buffer, c.at.offset, c.at.offset + ggml_nbytes(node->src[c.src])};
            if (std::any_of(written.begin(), written.end(), [&](const Range & w) { return w.overlaps(r); })) {
                compute_barrier(0, 0);
            }
            const size_t      slot = next_arg++;
            const ggml_status st   = record_check({&c}, {{slot + 1, n_indirect - slot - 1}}, args, &args, slot, &bound);
            if (st != GGML_STATUS_SUCCESS) {
                return st;
            }
            // The node and everything after it wait for the verdict.
            compute_barrier(VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
            written.clear();
            read.clear();
        }

        Dispatch d = plan(node);
        Location loc[k_tensor_slots];
        Range    ranges[k_tensor_slots];
        VkBuffer buffers[k_tensor_slots];
        for (int s = 0; s < k_tensor_slots; ++s) {
            const ggml_tensor * t = d.slot[s] != nullptr ? d.slot[s] : node;
            locate(dev_, t, true, &loc[s]);
            d.params.off[s] = uint32_t(loc[s].offset);
            ranges[s]       = {loc[s].buffer, loc[s].offset, loc[s].offset + ggml_nbytes(t)};
            buffers[s]      = loc[s].buffer;
        }
        bool hazard = false;
        for (const Range & w : written) {
            for (int s = 0; s < k_tensor_slots; ++s) {
                hazard = hazard || (d.slot[s] != nullptr && w.overlaps(ranges[s]));
            }
        }
        for (const Range & r : read) {
            hazard = hazard || r.overlaps(ranges[3]);
        }
        if (hazard) {
            compute_barrier(0, 0);
            written.clear();
            read.clear();
        }
        for (int s = 0; s < 3; ++s) {
            if (d.slot[s] != nullptr) {
                read.push_back(ranges[s]);
            }
        }
        written.push_back(ranges[3]);
        const bool        indirect = i >= first_checked;
        const ggml_status st = record(d, buffers, indirect ? &args : nullptr, indirect ? next_arg++ : 0, &bound);
        if (st != GGML_STATUS_SUCCESS) {
            return st;
        }
    }
    if (checks.empty()) {
        flush(nullptr);
        return GGML_STATUS_SUCCESS;
    }
    return finish_checked(checks);
}

void Stream::compute_barrier(VkPipelineStageFlags extra_stage, VkAccessFlags extra_access) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | extra_access;
    vkCmdPipelineBarrier(cur_->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | extra_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

ggml_status Stream::record_check(const std::vector<Check *> & checks,
                                 const std::vector<std::pair<size_t, size_t>> & zero, const Staged & args,
                                 const Staged * indirect, size_t slot, VkPipeline * bound) {
    Staged table;
    if (!stage(checks.size() * sizeof(IndexEntry), 16, &table)) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    auto *   entries = static_cast<IndexEntry *>(table.mapped);
    uint32_t n       = 0;
    for (size_t k = 0; k < checks.size(); ++k) {
        IndexEntry e = index_entry(checks[k]->node, checks[k]->src);
        e.off        = uint32_t(checks[k]->at.offset);
        e.first      = n;
        e.zero_at    = uint32_t(args.offset / 4 + zero[k].first * 3);
        e.zero_n     = uint32_t(zero[k].second * 3);
        n += e.count;
        std::memcpy(&entries[k], &e, sizeof(e));
        checks[k]->entry = &entries[k];
    }
    Dispatch d      = plan_check(n, uint32_t(checks.size()));
    d.params.off[1] = uint32_t(table.offset);
    const VkBuffer buffers[k_tensor_slots] = {checks[0]->at.buffer, table.buffer, table.buffer,
                                              args.buffer != VK_NULL_HANDLE ? args.buffer : table.buffer};
    return record(d, buffers, indirect, slot, bound);
}

ggml_status Stream::record(const Dispatch & d, const VkBuffer (&buffers)[k_tensor_slots], const Staged * args,
                           size_t slot, VkPipeline * bound) {
    VkPipeline p = dev_->pipeline(d.shader);
    if (p == VK_NULL_HANDLE) {
        return GGML_STATUS_FAILED; // logged
    }
    Staged ps;
    if (!stage(sizeof(Params), std::max<size_t>(16, dev_->min_storage_alignment()), &ps)) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    std::memcpy(ps.mapped, &d.params, sizeof(Params));
    VkDescriptorSet set = descriptor_set();
    if (set == VK_NULL_HANDLE) {
        LOOM_LOG_ERROR("%s: out of descriptor sets\n", name());
        return GGML_STATUS_ALLOC_FAILED;
    }
    VkDescriptorBufferInfo infos[1 + k_tensor_slots];
    infos[0] = {ps.buffer, VkDeviceSize(ps.offset), VkDeviceSize(sizeof(Params))};
    for (int s = 0; s < k_tensor_slots; ++s) {
        infos[1 + s] = {buffers[s], 0, VK_WHOLE_SIZE};
    }
    VkWriteDescriptorSet writes[1 + k_tensor_slots];
    for (int i = 0; i < 1 + k_tensor_slots; ++i) {
        writes[i]                 = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstSet          = set;
        writes[i].dstBinding      = uint32_t(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType  = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo     = &infos[i];
    }
    vkUpdateDescriptorSets(vk(), 1 + k_tensor_slots, writes, 0, nullptr);
    if (p != *bound) {
        vkCmdBindPipeline(cur_->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        *bound = p;
    }
    vkCmdBindDescriptorSets(cur_->cb, VK_PIPELINE_BIND_POINT_COMPUTE, dev_->pipeline_layout(), 0, 1, &set, 0,
                            nullptr);
    if (args == nullptr) {
        vkCmdDispatch(cur_->cb, d.groups[0], d.groups[1], d.groups[2]);
    } else {
        const size_t                    at = slot * sizeof(VkDispatchIndirectCommand);
        const VkDispatchIndirectCommand c{d.groups[0], d.groups[1], d.groups[2]};
        std::memcpy(static_cast<char *>(args->mapped) + at, &c, sizeof(c));
        vkCmdDispatchIndirect(cur_->cb, args->buffer, VkDeviceSize(args->offset + at));
    }
    return GGML_STATUS_SUCCESS;
}

// Note [Indices from data]: the wait and the verdict. The check tables
// live in staging memory, which stays mapped after its batch is retired;
// nothing is staged before their words are read.
ggml_status Stream::finish_checked(const std::vector<Check> & checks) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cur_->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    const uint64_t before = submitted_;
    flush(nullptr);
    if (submitted_ == before) {
        return GGML_STATUS_FAILED; // the submission failed (logged)
    }
    retire(true);
    for (const Check & c : checks) {
        IndexEntry e;
        std::memcpy(&e, c.entry, sizeof(e));
        if (e.bad == 0) {
            continue;
        }
        // The first node whose check failed: the graph stopped there.
        const ggml_tensor * idx = c.node->src[c.src];
        BadIndex            bad;
        bad.src      = c.src;
        bad.limit    = int64_t(e.limit);
        uint64_t pos = e.bad_index;
        size_t   off = 0;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            bad.at[d] = int64_t(pos % uint64_t(idx->ne[d]));
            pos /= uint64_t(idx->ne[d]);
            off += size_t(bad.at[d]) * idx->nb[d];
        }
        if (idx->type == GGML_TYPE_I64) {
            ggml_backend_tensor_get(idx, &bad.value, off, sizeof(int64_t));
        } else {
            int32_t v = 0;
            ggml_backend_tensor_get(idx, &v, off, sizeof(v));
            bad.value = v;
        }
        LOOM_LOG_ERROR("%s: %s\n", name(), bad_index_text(c.node, bad).c_str());
        return GGML_STATUS_FAILED;
    }
    return GGML_STATUS_SUCCESS;
}

} // namespace

ggml_backend * new_backend(Device * dev) {
    auto * s = new (std::nothrow) Stream(dev);
    if (s == nullptr || !s->init()) {
        LOOM_LOG_ERROR("%s: cannot create a backend (out of memory)\n", dev->name());
        delete s;
        return nullptr;
    }
    return s;
}

bool is_stream(const ggml_backend * b) {
    return ggml_guid_matches(b->guid, &g_vk_guid);
}

} // namespace loom::vk
