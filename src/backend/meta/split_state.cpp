// Split states of computed tensors, from the states of their sources: each
// member computes the operation on its slices, so an operation accepts only
// the states for which that gives the slice of the whole result (or a
// partial sum of it, for products over a split inner dimension).

#include <algorithm>
#include <numeric>

#include "core/common.h"
#include "meta.h"

namespace loom::meta {

bool is_split_axis(int axis) {
    return axis >= GGML_BACKEND_SPLIT_AXIS_0 && axis <= GGML_BACKEND_SPLIT_AXIS_3;
}

SplitState mirrored_state() {
    SplitState s{};
    s.axis       = GGML_BACKEND_SPLIT_AXIS_MIRRORED;
    s.nr[0]      = 1;
    s.n_segments = 1;
    return s;
}

int64_t share(const SplitState & s, size_t n_devs, size_t j) {
    if (!is_split_axis(s.axis)) {
        return 0;
    }
    int64_t n = 0;
    for (uint32_t seg = 0; seg < s.n_segments; ++seg) {
        n += s.ne[seg * n_devs + j] * s.nr[seg];
    }
    return n;
}

bool same_shares(const SplitState & a, const SplitState & b, size_t n_devs) {
    if (a.axis != b.axis) {
        return false;
    }
    if (!is_split_axis(a.axis)) {
        return true;
    }
    for (size_t j = 0; j < n_devs; ++j) {
        int64_t sa = 0, sb = 0;
        for (uint32_t s = 0; s < a.n_segments; ++s) sa += a.ne[s * n_devs + j] * a.nr[s];
        for (uint32_t s = 0; s < b.n_segments; ++s) sb += b.ne[s * n_devs + j] * b.nr[s];
        if (sa != sb) {
            return false;
        }
    }
    return true;
}

namespace {

SplitState unknown() {
    SplitState s{};
    s.axis       = GGML_BACKEND_SPLIT_AXIS_UNKNOWN;
    s.nr[0]      = 1;
    s.n_segments = 1;
    return s;
}

// One segment with the members' shares of s, along a new axis.
SplitState flattened(const SplitState & s, int axis, size_t n_devs) {
    SplitState r{};
    r.axis       = ggml_backend_meta_split_axis(axis);
    r.nr[0]      = 1;
    r.n_segments = 1;
    for (size_t j = 0; j < n_devs; ++j) {
        for (uint32_t seg = 0; seg < s.n_segments; ++seg) {
            r.ne[j] += s.ne[seg * n_devs + j] * s.nr[seg];
        }
    }
    return r;
}

bool is_mirrored(const SplitState & s) {
    return s.axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED;
}

// A tensor held whole by one member (the others' pieces empty) is split
// along any dimension of extent 1 as well: the state along axis, or s.
SplitState whole_on_one_as(const SplitState & s, const ggml_tensor * t, int axis, size_t n_devs) {
    if (!is_split_axis(s.axis) || s.axis == axis || s.n_segments != 1 || t->ne[axis] != 1) {
        return s;
    }
    int holders = 0;
    for (size_t j = 0; j < n_devs; ++j) {
        const int64_t sh = share(s, n_devs, j);
        if (sh != 0 && sh != t->ne[s.axis]) return s;
        holders += sh != 0;
    }
    if (holders != 1) {
        return s;
    }
    SplitState r = s;
    r.axis       = ggml_backend_meta_split_axis(axis);
    r.nr[0]      = 1;
    for (size_t j = 0; j < n_devs; ++j) r.ne[j] = s.ne[j] != 0 ? 1 : 0;
    return r;
}

// Every source has the same state (element-wise operations).
SplitState all_equal(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    const SplitState * first = nullptr;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (t->src[i] == nullptr || t->src[i] == t) { // ggml_cast's result is its own destination
            continue;
        }
        if (first == nullptr) {
            first = &src[i];
        } else if (!same_shares(*first, src[i], n_devs)) {
            reason = "its sources are split differently";
            return unknown();
        }
    }
    return first != nullptr ? *first : mirrored_state();
}

// src1 (and src2) broadcast over src0: along src0's split axis src1 must be
// mirrored with extent 1, or split as src0.
SplitState broadcast(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    const SplitState & s0 = src[0];
    for (int i = 1; i < GGML_MAX_SRC; ++i) {
        const ggml_tensor * b = t->src[i];
        if (b == nullptr) {
            continue;
        }
        const bool ok = same_shares(s0, src[i], n_devs) ||
                        (is_mirrored(src[i]) && (is_mirrored(s0) || (is_split_axis(s0.axis) && b->ne[s0.axis] == 1)));
        if (!ok) {
            reason = "a broadcast source is not split as the first source, nor mirrored with extent 1 on its axis";
            return unknown();
        }
    }
    return s0;
}

// Operations on whole rows (dimension 0).
SplitState per_row(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    if (src[0].axis == GGML_BACKEND_SPLIT_AXIS_0) {
        reason = "the operation reads whole rows and its source is split along dimension 0";
        return unknown();
    }
    return broadcast(t, src, n_devs, reason);
}

// a and b split along the same batch axis (2 or 3) of a product: ggml
// broadcasts a over b along it (b's extent a multiple of a's), which holds
// on each member when every member's share of b is the whole ratio times its
// share of a (grouped-query attention: kv heads against query heads).
bool broadcasts_per_member(const ggml_tensor * t, const SplitState & a, const SplitState & b, size_t n_devs) {
    const int     axis = a.axis;
    const int64_t na = t->src[0]->ne[axis], nb = t->src[1]->ne[axis];
    if (na == 0 || nb % na != 0) {
        return false;
    }
    for (size_t j = 0; j < n_devs; ++j) {
        if (share(b, n_devs, j) != share(a, n_devs, j) * (nb / na)) {
            return false;
        }
    }
    return true;
}

SplitState mul_mat(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    SplitState a = src[0];
    SplitState b = src[1];
    // A source held whole by one member against one split by batch (a
    // single KV head against query heads).
    if (is_split_axis(b.axis) && b.axis >= 2) a = whole_on_one_as(a, t->src[0], b.axis, n_devs);
    if (is_split_axis(a.axis) && a.axis >= 2) b = whole_on_one_as(b, t->src[1], a.axis, n_devs);
    if (is_mirrored(a) && is_mirrored(b)) {
        return mirrored_state();
    }
    if (a.axis == GGML_BACKEND_SPLIT_AXIS_1 && is_mirrored(b)) {
        SplitState r = a; // rows of the weight, segments included: rows of the result
        r.axis       = GGML_BACKEND_SPLIT_AXIS_0;
        return r;
    }
    if (b.axis == GGML_BACKEND_SPLIT_AXIS_1 && is_mirrored(a)) {
        return b;
    }
    if (a.axis == GGML_BACKEND_SPLIT_AXIS_0 && b.axis == GGML_BACKEND_SPLIT_AXIS_0 && same_shares(a, b, n_devs)) {
        SplitState p = mirrored_state();
        p.axis       = GGML_BACKEND_SPLIT_AXIS_PARTIAL;
        return p;
    }
    if (is_split_axis(a.axis) && a.axis >= 2 && b.axis == a.axis && broadcasts_per_member(t, a, b, n_devs)) {
        return b;
    }
    if (is_split_axis(b.axis) && b.axis >= 2 && is_mirrored(a) && t->src[0]->ne[b.axis] == 1) {
        return b;
    }
    reason = std::string("no product of these source states (") + ggml_backend_meta_split_axis_name(a.axis) + " for " +
             describe(t->src[0]).text + ", " + ggml_backend_meta_split_axis_name(b.axis) + " for " +
             describe(t->src[1]).text + ")";
    return unknown();
}

// A gated unit with one source computes the first half of each row against
// the second. Split along the rows, that holds on each member when its
// slice is its share of the first half followed by the same share of the
// second: two segments with equal shares (a fused gate and up product
// split as two segments), or one segment repeated twice. The result holds
// the first segment's shares.
SplitState glu_one_source(const SplitState & a, size_t n_devs, std::string & reason) {
    const bool two = a.n_segments == 2 && a.nr[0] == 1 && a.nr[1] == 1 &&
                     std::equal(a.ne, a.ne + n_devs, a.ne + n_devs);
    const bool twice = a.n_segments == 1 && a.nr[0] == 2;
    if (!two && !twice) {
        reason = "a gated unit with one source splits its rows in halves: its source needs two equal segments";
        return unknown();
    }
    SplitState r = a;
    r.n_segments = 1;
    r.nr[0]      = 1;
    for (size_t j = n_devs; j < 2 * n_devs; ++j) r.ne[j] = 0;
    return r;
}

// The experts' product: as mul_mat for the experts [K, M, n_expert] and b
// [K, n_b, tokens], with the experts' own dimension (2) never split and the
// expert ids mirrored: rows of the experts give rows of the result, and K
// split in both gives a partial sum.
SplitState mul_mat_id(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    if (!is_mirrored(src[2])) {
        reason = "the expert ids of a mul_mat_id must be mirrored";
        return unknown();
    }
    if ((is_split_axis(src[0].axis) && src[0].axis >= 2) || (is_split_axis(src[1].axis) && src[1].axis >= 1)) {
        reason = "mul_mat_id splits the experts' rows or K only";
        return unknown();
    }
    return mul_mat(t, src, n_devs, reason);
}

// A vector of one value per head (attention sinks, [heads]) split along
// dimension 0 as the heads are split along dimension 2 of heads.
bool split_per_head(const SplitState & v, const SplitState & heads, size_t n_devs) {
    if (v.axis != GGML_BACKEND_SPLIT_AXIS_0 || heads.axis != GGML_BACKEND_SPLIT_AXIS_2) {
        return false;
    }
    for (size_t j = 0; j < n_devs; ++j) {
        if (share(v, n_devs, j) != share(heads, n_devs, j)) {
            return false;
        }
    }
    return true;
}

// Soft max of attention scores [n_kv, n_q, heads, seqs] split by heads: the
// mask broadcasts (mirrored), the sinks (src2) are split with the heads.
SplitState soft_max(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    if (t->src[2] != nullptr && split_per_head(src[2], src[0], n_devs)) {
        SplitState s[GGML_MAX_SRC];
        std::copy(src, src + GGML_MAX_SRC, s);
        s[2] = src[0];
        return per_row(t, s, n_devs, reason);
    }
    return per_row(t, src, n_devs, reason);
}

// The experts' biases: a [n, slots, tokens] plus row ids[slot, token] of b
// [n, n_expert], ids mirrored: a and b split alike along dimension 0 (the
// experts' rows) or both mirrored.
SplitState add_id(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    (void) t;
    if (!is_mirrored(src[2]) ||
        !((is_mirrored(src[0]) && is_mirrored(src[1])) ||
          (src[0].axis == GGML_BACKEND_SPLIT_AXIS_0 && same_shares(src[0], src[1], n_devs)))) {
        reason = "add_id needs mirrored ids and a and b split alike along dimension 0, or mirrored";
        return unknown();
    }
    return src[0];
}

// Concatenation along a dimension other than the split axis, of sources
// split alike (llama.cpp's recurrent convolution input: the state's columns
// before the new tokens', channels split).
SplitState concat(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    const int dim = op_param_i32(t, 0);
    if (is_split_axis(src[0].axis) && src[0].axis == dim) {
        reason = "a concatenation along its sources' split axis";
        return unknown();
    }
    return all_equal(t, src, n_devs, reason);
}

// The recurrent layers' convolution over time, channel by channel: sx
// [d_conv - 1 + n_t, channels, seqs] and the kernel [d_conv, channels] split
// alike by channels give the result [channels, n_t, seqs] split by channels.
SplitState ssm_conv(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    (void) t;
    if (is_mirrored(src[0]) && is_mirrored(src[1])) {
        return mirrored_state();
    }
    if (src[0].axis != GGML_BACKEND_SPLIT_AXIS_1 || !same_shares(src[0], src[1], n_devs)) {
        reason = "ssm_conv needs its input and kernel split alike by channels (dimension 1), or mirrored";
        return unknown();
    }
    SplitState r = src[0];
    r.axis       = GGML_BACKEND_SPLIT_AXIS_0;
    return r;
}

// q [d, n_q, heads, seqs], k/v [d, n_kv, kv_heads, seqs] split by heads give
// the result [d_v, heads, n_q, seqs] split by heads (dimension 1). Each
// member's query heads are the whole ratio times its KV heads (a single KV
// head, held whole by one member, counts as split by heads).
SplitState flash_attn(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    const SplitState & q = src[0];
    if (is_mirrored(q)) {
        return all_equal(t, src, n_devs, reason);
    }
    const SplitState k = whole_on_one_as(src[1], t->src[1], 2, n_devs);
    const SplitState v = whole_on_one_as(src[2], t->src[2], 2, n_devs);
    // One KV head that every member holds (DeepSeek 4's shared latent KV)
    // serves each member's query heads as it serves all of them.
    const bool shared_kv = is_mirrored(k) && is_mirrored(v) && t->src[1]->ne[2] == 1 && t->src[2]->ne[2] == 1;
    if (q.axis != GGML_BACKEND_SPLIT_AXIS_2 ||
        (!shared_kv && (k.axis != GGML_BACKEND_SPLIT_AXIS_2 || v.axis != GGML_BACKEND_SPLIT_AXIS_2))) {
        reason = "attention needs q, k and v split by heads (or one KV head on every member)";
        return unknown();
    }
    const int64_t nq = t->src[0]->ne[2], nk = t->src[1]->ne[2];
    for (size_t j = 0; j < n_devs && !shared_kv; ++j) {
        if (nk == 0 || nq % nk != 0 || share(q, n_devs, j) != share(k, n_devs, j) * (nq / nk) ||
            share(k, n_devs, j) != share(v, n_devs, j)) {
            reason = "a member's query heads are not the whole ratio times its KV heads";
            return unknown();
        }
    }
    for (int i = 3; i < GGML_MAX_SRC; ++i) {
        if (t->src[i] != nullptr && !is_mirrored(src[i]) && !(i == 4 && split_per_head(src[i], q, n_devs))) {
            reason = "the attention mask must be mirrored, and the sinks mirrored or split with the heads";
            return unknown();
        }
    }
    return flattened(q, 1, n_devs);
}

SplitState get_rows(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    if (is_mirrored(src[1]) && (is_mirrored(src[0]) || src[0].axis == GGML_BACKEND_SPLIT_AXIS_0)) {
        return src[0];
    }
    (void) t;
    (void) n_devs;
    reason = "get_rows needs mirrored indices and a source split along dimension 0 or mirrored";
    return unknown();
}

SplitState rope(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    (void) n_devs;
    for (int i = 1; i < GGML_MAX_SRC; ++i) {
        if (t->src[i] != nullptr && !is_mirrored(src[i])) {
            reason = "rope needs mirrored positions and frequency factors";
            return unknown();
        }
    }
    if (src[0].axis == GGML_BACKEND_SPLIT_AXIS_0) {
        reason = "rope rotates whole rows";
        return unknown();
    }
    return src[0];
}

// Copies into another shape (ggml_cont_2d, ggml_cpy into a reshaped tensor)
// read the source in its logical order: a reshape of its state.
SplitState copy(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    const ggml_tensor * s0 = t->src[0];
    if (!is_split_axis(src[0].axis) || ggml_are_same_shape(t, s0)) {
        return all_equal(t, src, n_devs, reason);
    }
    SplitState r = reshape_state(src[0], s0->ne, t->ne, n_devs, reason);
    if (r.axis == GGML_BACKEND_SPLIT_AXIS_UNKNOWN) return r;
    if (t->src[1] != nullptr && t->src[1] != t && !same_shares(r, src[1], n_devs)) {
        reason = "a copy into a tensor split differently";
        return unknown();
    }
    return r;
}

// The rows src0 into the rows of the destination (t's view source) named by
// mirrored indices src1: the rows split along dimension 0 or mirrored, as the
// destination (which the placement of t as a view checks).
SplitState set_rows(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    (void) t;
    (void) n_devs;
    if (!is_mirrored(src[1]) || !(is_mirrored(src[0]) || src[0].axis == GGML_BACKEND_SPLIT_AXIS_0)) {
        reason = "set_rows needs mirrored indices and rows split along dimension 0 or mirrored";
        return unknown();
    }
    return src[0];
}

// A gated unit: with one source split along its rows it halves each row;
// otherwise element-wise.
SplitState glu(const ggml_tensor * t, const SplitState * src, size_t n_devs, std::string & reason) {
    if (t->src[1] == nullptr && src[0].axis == GGML_BACKEND_SPLIT_AXIS_0) {
        return glu_one_source(src[0], n_devs, reason);
    }
    return all_equal(t, src, n_devs, reason);
}

using Rule = SplitState (*)(const ggml_tensor *, const SplitState *, size_t, std::string &);

struct OpRule {
    ggml_op op;
    Rule    rule;
};

// The split rules of the operations with a rule of their own. The others
// follow their row's OpShape (core/op_table.h): element-wise ones take the
// sources' common state, broadcasts that of the first source, operations on
// whole rows need rows whole; any other operation is computed on mirrored
// sources only.
constexpr OpRule k_rules[] = {
    {GGML_OP_GLU, glu}, {GGML_OP_SOFT_MAX, soft_max},
    {GGML_OP_ROPE, rope}, {GGML_OP_ROPE_BACK, rope}, // DeepSeek 4 takes the rotation off its attention output
    // products and attention
    {GGML_OP_MUL_MAT, mul_mat}, {GGML_OP_MUL_MAT_ID, mul_mat_id}, {GGML_OP_ADD_ID, add_id},
    {GGML_OP_FLASH_ATTN_EXT, flash_attn},
    // copies, rows, concatenation, recurrent layers
    {GGML_OP_CONT, copy}, {GGML_OP_DUP, copy}, {GGML_OP_CPY, copy}, {GGML_OP_GET_ROWS, get_rows},
    {GGML_OP_SET_ROWS, set_rows}, {GGML_OP_CONCAT, concat}, {GGML_OP_SSM_CONV, ssm_conv},
};

Rule rule_of(ggml_op op) {
    for (const OpRule & r : k_rules) {
        if (r.op == op) return r.rule;
    }
    switch (op_shape(op)) {
        case OpShape::elementwise: return all_equal;
        case OpShape::broadcast: return broadcast;
        case OpShape::rows: return per_row;
        case OpShape::other: return nullptr;
    }
    return nullptr;
}

} // namespace

SplitState reshape_state(const SplitState & st, const int64_t * ne_in, const int64_t * ne_out, size_t n,
                         std::string & reason) {
    const int a        = st.axis;
    int64_t   outer_in = 1;
    for (int k = 0; k <= a; ++k) outer_in *= ne_in[k];
    const int64_t inner_in = outer_in / ne_in[a];
    // The output dimensions that end where the split axis ends: several when
    // dimensions of extent 1 follow (a single KV head, [head dim, 1, tokens],
    // held whole by one member). The first is taken, except that dimension 0
    // gives way to dimension 1 when the pieces are whole rows, so that the
    // operations on rows (norms, rope) can take the result.
    int     ends[GGML_MAX_DIMS];
    int64_t inner[GGML_MAX_DIMS];
    int     n_ends = 0;
    int64_t prod   = 1;
    for (int d = 0; d < GGML_MAX_DIMS && prod <= outer_in; ++d) {
        const int64_t inner_out = prod;
        prod *= ne_out[d];
        if (prod == outer_in) {
            ends[n_ends]  = d;
            inner[n_ends] = inner_out;
            ++n_ends;
        }
    }
    if (n_ends == 0) {
        reason = "a reshape moves the split axis inside a dimension";
        return unknown();
    }
    const int order[2] = {n_ends > 1 && ends[0] == 0 ? 1 : 0, 0};
    for (int o = 0; o < (order[0] == 1 ? 2 : 1); ++o) {
        const int  e = order[o];
        SplitState s = st;
        s.axis       = ggml_backend_meta_split_axis(ends[e]);
        bool whole   = true;
        for (uint32_t seg = 0; seg < s.n_segments && whole; ++seg) {
            for (size_t j = 0; j < n; ++j) {
                const int64_t el = st.ne[seg * n + j] * inner_in;
                if (el % inner[e] != 0) {
                    whole = false;
                    break;
                }
                s.ne[seg * n + j] = el / inner[e];
            }
        }
        if (whole) {
            return s;
        }
    }
    reason = "a reshape cuts a member's piece";
    return unknown();
}

SplitState derive_state(const ggml_tensor * t, size_t n_devs, std::string & reason) {
    SplitState src[GGML_MAX_SRC];
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        src[i] = mirrored_state();
        if (t->src[i] == nullptr || t->src[i] == t) {
            continue;
        }
        if (is_meta_buffer(t->src[i]->buffer)) {
            if (slices_of(t->src[i]) == nullptr) {
                reason = std::string("source ") + describe(t->src[i]).text + " has not been placed in its meta buffer";
                return unknown();
            }
            src[i] = state_as_source(t->src[i]);
        } else {
            reason = "a source is not in a meta buffer";
            return unknown();
        }
    }
    if (const Rule rule = rule_of(t->op)) {
        return rule(t, src, n_devs, reason);
    }
    SplitState s = all_equal(t, src, n_devs, reason);
    if (s.axis != GGML_BACKEND_SPLIT_AXIS_MIRRORED) {
        reason = std::string("operation ") + ggml_op_desc(t) + " is computed on mirrored sources only";
        return unknown();
    }
    return s;
}

} // namespace loom::meta
