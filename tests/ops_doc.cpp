// loom-ops-doc: the tables of docs/operators.md, printed from the operator
// rows (src/core/op_table.h) and the conformance suite's cases (which of
// them the CPU device supports), so that the page never drifts from the
// code. The tables sit between two marker lines of the page.
//
// Usage: loom-ops-doc                 print the tables
//        loom-ops-doc --check FILE    exit status 1 when FILE's tables differ
//        loom-ops-doc --update FILE   write the tables into FILE

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "backend_ops_cases.h"
#include "core/op_table.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

constexpr const char * k_begin = "<!-- BEGIN loom-ops-doc: generated, do not edit by hand -->";
constexpr const char * k_end   = "<!-- END loom-ops-doc -->";

// Cases of the conformance suite per operator (and per unary and gated
// unit operator), and how many of them the CPU device supports.
struct Coverage {
    int cases = 0;
    int cpu   = 0;
};
struct AllCoverage {
    std::map<int, Coverage> ops, unary, glu;
};

AllCoverage coverage() {
    AllCoverage          all;
    ggml_backend_dev_t   cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    for (const loomtest::ops::OpCase & c : loomtest::ops::all_cases()) {
        ggml_init_params ip{size_t(64) << 20, nullptr, true};
        ggml_context *   ctx = ggml_init(ip);
        loomtest::ops::Builder b(ctx);
        const ggml_tensor *    t         = c.build(b);
        const bool             supported = cpu != nullptr && ggml_backend_dev_supports_op(cpu, t);
        auto                   count     = [supported](Coverage & cv) {
            ++cv.cases;
            cv.cpu += supported ? 1 : 0;
        };
        count(all.ops[t->op]);
        if (t->op == GGML_OP_UNARY) count(all.unary[ggml_get_unary_op(t)]);
        if (t->op == GGML_OP_GLU) count(all.glu[ggml_get_glu_op(t)]);
        ggml_free(ctx);
    }
    return all;
}

std::string cell(const std::map<int, Coverage> & m, int key) {
    const auto it = m.find(key);
    if (it == m.end()) return "no case";
    return std::to_string(it->second.cpu) + "/" + std::to_string(it->second.cases);
}

// A table cell's text: '|' would end the cell.
std::string escaped(const char * s) {
    std::string r;
    for (; *s != '\0'; ++s) {
        if (*s == '|') r += '\\';
        r += *s;
    }
    return r;
}

const char * kind_name(loom::OpKind k) {
    switch (k) {
        case loom::OpKind::none: return "leaf";
        case loom::OpKind::compute: return "compute";
        case loom::OpKind::view: return "view";
        case loom::OpKind::custom: return "custom";
        case loom::OpKind::training: return "training";
    }
    return "?";
}

const char * shape_name(loom::OpShape s) {
    switch (s) {
        case loom::OpShape::other: return "";
        case loom::OpShape::elementwise: return "element-wise";
        case loom::OpShape::broadcast: return "broadcast";
        case loom::OpShape::rows: return "rows";
    }
    return "?";
}

std::string index_sources(const loom::OpIndices & ix) {
    std::string r;
    for (int s = 0; s < GGML_MAX_SRC; ++s) {
        if ((ix.srcs >> s & 1u) == 0) continue;
        const std::string bound = ix.bound == loom::k_bound_node ? std::string("node") : "src[" + std::to_string(ix.bound) + "]";
        r += (r.empty() ? "" : ", ") + ("src[" + std::to_string(s) + "] < " + bound + ".ne[" + std::to_string(ix.dim) + "]");
    }
    return r;
}

std::string tables() {
    const AllCoverage  cv = coverage();
    std::ostringstream o;
    o << k_begin << "\n\n";
    o << "### Every operator\n\n"
         "From `src/core/op_table.h`. *sources*: how many it needs (and may have); *shape*: how each element of the "
         "result depends on the sources, where one simple rule says it; *in place*: the allocator may compute it into "
         "a source's memory (or it writes a source: `cpy`, `set_rows`); *indices*: sources that hold indices and what "
         "bounds them; *gradient*: `ggml_build_backward_expand` has a rule for it; *CPU*: the conformance suite's "
         "cases of the operator (`tests/backend_ops_cases.cpp`) that the CPU device supports, of all its cases.\n\n";
    o << "| # | operator | symbol | sources | kind | shape | in place | indices | gradient | CPU |\n";
    o << "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const loom::OpInfo & i : loom::k_ops) {
        const std::string srcs = i.min_src == i.max_src ? std::to_string(i.min_src)
                                                        : std::to_string(i.min_src) + "–" + std::to_string(i.max_src);
        const char * in_place = (i.flags & loom::k_op_in_place) != 0       ? "yes"
                                : (i.flags & loom::k_op_writes_source) != 0 ? "writes a source"
                                                                            : "";
        o << "| " << int(i.op) << " | `" << i.name << "` | `" << escaped(i.symbol) << "` | " << srcs << " | "
          << kind_name(i.kind) << " | " << shape_name(i.shape) << " | " << in_place << " | "
          << index_sources(i.indices) << " | " << ((i.flags & loom::k_op_grad) != 0 ? "yes" : "") << " | "
          << (i.kind == loom::OpKind::none ? "" : cell(cv.ops, i.op)) << " |\n";
    }
    o << "\n### Unary operators (`GGML_OP_UNARY`)\n\n";
    o << "| # | operator | gradient | CPU |\n|---|---|---|---|\n";
    for (const loom::UnaryInfo & u : loom::k_unary_ops) {
        o << "| " << int(u.op) << " | `" << u.name << "` | " << ((u.flags & loom::k_op_grad) != 0 ? "yes" : "")
          << " | " << cell(cv.unary, u.op) << " |\n";
    }
    o << "\n### Gated linear units (`GGML_OP_GLU`)\n\n";
    o << "| # | operator | gradient | CPU |\n|---|---|---|---|\n";
    for (const loom::GluInfo & g : loom::k_glu_ops) {
        o << "| " << int(g.op) << " | `" << g.name << "` | "
          << ((g.flags & loom::k_op_grad) != 0 ? "yes (split form)" : "") << " | " << cell(cv.glu, g.op) << " |\n";
    }
    o << "\n" << k_end << "\n";
    return o.str();
}

// FILE's text with its tables (the marker lines and what is between them)
// replaced by `generated`; false when FILE has no markers.
bool replaced(const std::string & text, const std::string & generated, std::string & out) {
    const size_t b = text.find(k_begin);
    const size_t e = text.find(k_end);
    if (b == std::string::npos || e == std::string::npos || e < b) return false;
    size_t after = e + std::strlen(k_end);
    if (after < text.size() && text[after] == '\n') ++after;
    out = text.substr(0, b) + generated + text.substr(after);
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    const std::string generated = tables();
    if (argc == 1) {
        std::fputs(generated.c_str(), stdout);
        return 0;
    }
    if (argc != 3 || (std::strcmp(argv[1], "--check") != 0 && std::strcmp(argv[1], "--update") != 0)) {
        std::fprintf(stderr, "usage: %s [--check FILE | --update FILE]\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[2]);
        return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::string       want;
    if (!replaced(text, generated, want)) {
        std::fprintf(stderr, "%s: %s has no lines \"%s\" and \"%s\"\n", argv[0], argv[2], k_begin, k_end);
        return 2;
    }
    if (std::strcmp(argv[1], "--check") == 0) {
        if (want != text) {
            std::fprintf(stderr,
                         "%s: the operator tables of %s differ from the operator rows; run %s --update %s\n",
                         argv[0], argv[2], argv[0], argv[2]);
            return 1;
        }
        return 0;
    }
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out << want;
    return out ? 0 : 2;
}
