#include "tensor_split.h"

#include <cstring>
#include <string_view>
#include <vector>

namespace loom_run {

namespace {

ggml_backend_meta_split_state mirrored() {
    ggml_backend_meta_split_state s{};
    s.axis       = GGML_BACKEND_SPLIT_AXIS_MIRRORED;
    s.nr[0]      = 1;
    s.n_segments = 1;
    return s;
}

// n units shared by the members as evenly as possible, the first ones taking
// the remainder.
std::vector<int64_t> shares(int64_t n, size_t members) {
    std::vector<int64_t> out(members, n / int64_t(members));
    for (size_t j = 0; j < size_t(n % int64_t(members)); ++j) ++out[j];
    return out;
}

ggml_backend_meta_split_state along(int axis, const std::vector<int64_t> & units, int64_t unit) {
    ggml_backend_meta_split_state s{};
    s.axis       = ggml_backend_meta_split_axis(axis);
    s.nr[0]      = 1;
    s.n_segments = 1;
    for (size_t j = 0; j < units.size(); ++j) s.ne[j] = units[j] * unit;
    return s;
}

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

} // namespace

ggml_backend_meta_split_state tensor_split_state(const ggml_tensor * tensor, void * userdata) {
    const TensorSplit & ts   = *static_cast<const TensorSplit *>(userdata);
    const std::string_view name = ggml_get_name(tensor);
    if (ts.n_members == 0 || ts.head_dim == 0 || ts.n_head_kv == 0) return mirrored();
    // KV heads shared out; each member takes the query heads of its KV heads.
    const std::vector<int64_t> kv = shares(ts.n_head_kv, ts.n_members);
    std::vector<int64_t>       q  = kv;
    for (int64_t & h : q) h *= ts.n_head / ts.n_head_kv;
    // Hidden rows in units of the weights' block size, so that the columns
    // of a quantized ffn_down stay whole blocks.
    const int64_t blck   = ggml_blck_size(tensor->type);
    const int64_t ff_unit = ts.n_ff % (blck * int64_t(ts.n_members)) == 0 ? blck : 1;
    const auto    ff      = shares(ts.n_ff / ff_unit, ts.n_members);
    const bool    is_2d   = tensor->ne[2] == 1 && tensor->ne[3] == 1;
    if (!is_2d) return mirrored();
    if (ends_with(name, "attn_q.weight") && tensor->ne[1] == int64_t(ts.head_dim * ts.n_head)) {
        return along(1, q, ts.head_dim);
    }
    if ((ends_with(name, "attn_k.weight") || ends_with(name, "attn_v.weight")) &&
        tensor->ne[1] == int64_t(ts.head_dim * ts.n_head_kv)) {
        return along(1, kv, ts.head_dim);
    }
    if (ends_with(name, "attn_output.weight") && tensor->ne[0] == int64_t(ts.head_dim * ts.n_head) &&
        ts.head_dim % blck == 0) {
        return along(0, q, ts.head_dim);
    }
    if (name.starts_with("cache_") && tensor->ne[0] == int64_t(ts.head_dim * ts.n_head_kv) &&
        ts.head_dim % blck == 0) {
        return along(0, kv, ts.head_dim);
    }
    if ((ends_with(name, "ffn_gate.weight") || ends_with(name, "ffn_up.weight")) && tensor->ne[1] == ts.n_ff) {
        return along(1, shares(ts.n_ff, ts.n_members), 1);
    }
    if (ends_with(name, "ffn_down.weight") && tensor->ne[0] == ts.n_ff && ff_unit % blck == 0) {
        return along(0, ff, ff_unit);
    }
    return mirrored();
}

} // namespace loom_run
