// Debug output of the scheduler: the split plan (GGML_SCHED_DEBUG), the
// Chrome trace file and the Graphviz export of the placed graph.

#include "trace.h"

#include <cstdio>

#include "core/common.h"
#include "sched.h"

namespace loom::sched {

const char * cause_name(Cause c) {
    switch (c) {
        case Cause::none: return "";
        case Cause::user: return "usr";
        case Cause::dst_buffer: return "1.dst";
        case Cause::view_buffer: return "1.vsrc";
        case Cause::input: return "1.inp";
        case Cause::weights: return "1.wgt";
        case Cause::offload: return "1.off";
        case Cause::expand: return "2.sup";
        case Cause::best: return "3.best";
        case Cause::upgrade: return "3.upg";
        case Cause::view_src: return "4.vsrc";
        case Cause::consumer: return "4.cur";
        case Cause::fallback: return "4.any";
    }
    return "";
}

namespace {

void json_string(FILE * f, const std::string & s) {
    std::fputc('"', f);
    for (char ch : s) {
        if (ch == '"' || ch == '\\') {
            std::fputc('\\', f);
            std::fputc(ch, f);
        } else if (static_cast<unsigned char>(ch) < 0x20) {
            std::fprintf(f, "\\u%04x", ch);
        } else {
            std::fputc(ch, f);
        }
    }
    std::fputc('"', f);
}

std::string fmt_size(size_t n) {
    char buf[32];
    if (n >= 1024 * 1024) {
        std::snprintf(buf, sizeof(buf), "%zuM", n / 1024 / 1024);
    } else {
        std::snprintf(buf, sizeof(buf), "%zuK", n / 1024);
    }
    return buf;
}

} // namespace

bool Trace::write() const {
    FILE * f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_sched: cannot write the trace to %s\n", path.c_str());
        return false;
    }
    std::fprintf(f, "{\"traceEvents\":[\n");
    bool first = true;
    for (size_t t = 0; t < track_names.size(); ++t) {
        std::fprintf(f, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%zu,\"args\":{\"name\":", first ? "" : ",\n",
                     t);
        json_string(f, track_names[t]);
        std::fprintf(f, "}}");
        first = false;
    }
    for (const TraceEvent & e : events) {
        std::fprintf(f, "%s{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%lld,\"dur\":%lld,\"cat\":", first ? "" : ",\n",
                     e.track, (long long) e.ts_us, (long long) e.dur_us);
        json_string(f, e.category);
        std::fprintf(f, ",\"name\":");
        json_string(f, e.name);
        std::fprintf(f, ",\"args\":{\"bytes\":%zu}}", e.bytes);
        first = false;
    }
    std::fprintf(f, "\n]}\n");
    const bool ok = std::fclose(f) == 0;
    if (!ok) {
        LOOM_LOG_ERROR("ggml_backend_sched: error writing the trace to %s\n", path.c_str());
    }
    return ok;
}

} // namespace loom::sched

using namespace loom::sched;

void ggml_backend_sched::print_plan(const ggml_cgraph * g) const {
    size_t k = 0;
    for (int i = 0; i < g->n_nodes; ++i) {
        if (k < splits.size() && i == splits[k].i_start) {
            const Split & sp = splits[k];
            std::string   line = "## SPLIT #" + std::to_string(k) + ": " + ggml_backend_name(backends[size_t(sp.backend)]) +
                               " # " + std::to_string(sp.inputs.size()) + " inputs";
            for (size_t j = 0; j < sp.inputs.size(); ++j) {
                line += j == 0 ? ": " : " ";
                line += std::string("[") + sp.inputs[j]->name + " (" + fmt_size(ggml_nbytes(sp.inputs[j])) + ")]";
            }
            LOOM_LOG_DEBUG("%s\n", line.c_str());
            ++k;
        }
        const ggml_tensor * node = g->nodes[i];
        if (config.debug < 2 || loom::is_view_op(node->op)) {
            continue;
        }
        auto where = [&](const ggml_tensor * t) {
            const int b  = id(t);
            const Cause * c = cause_of.find(t);
            return std::string(b >= 0 ? ggml_backend_name(backends[size_t(b)]) : "NULL") + " " +
                   (c != nullptr ? cause_name(*c) : "");
        };
        std::string line = "node #" + std::to_string(i) + " (" + ggml_op_desc(node) + "): " + node->name + " (" +
                           fmt_size(ggml_nbytes(node)) + ") [" + where(node) + "]";
        for (const ggml_tensor * src : node->src) {
            if (src != nullptr) {
                line += std::string(" ") + src->name + " (" + fmt_size(ggml_nbytes(src)) + ") [" + where(src) + "]";
            }
        }
        LOOM_LOG_DEBUG("%s\n", line.c_str());
    }
}
