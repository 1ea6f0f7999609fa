// RPC backend over loopback, beside a raw TCP copy of the same bytes in the
// same run:
//  - tensor upload of new content (to a server without a content cache,
//    the default; and to one with a cache: probe lookup + send + the
//    server's keeping of it), of content the caching server already holds,
//    and download, MiB/s and as a fraction of one TCP socket pair on 127.0.0.1
//    moving the same bytes, for each size;
//  - the round trip of a small graph computation (the graph cached on the
//    server, re-sent each time, and with its input set and its output read
//    as an inference step does: waited for call by call, and issued on the
//    stream with one synchronize), against the same graph on the local CPU
//    and as a multiple of a 1-byte TCP ping-pong on loopback.
// Medians of the repeats (the machine is shared; single runs are noisy,
// ratios measured in the same run less so).
//
//   bench_rpc [MiB[,MiB...]] [repeats]     (default: 64,1024 and 3)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml-rpc.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Seconds to move n bytes through a TCP connection on loopback, into a buffer.
double tcp_copy(const std::vector<uint8_t> & src, std::vector<uint8_t> & dst) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family      = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len     = sizeof(a);
    if (bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        std::perror("bench_rpc: socket");
        std::exit(1);
    }
    const int cs = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cs, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
        std::perror("bench_rpc: connect");
        std::exit(1);
    }
    const int rs = accept(ls, nullptr, nullptr);
    const auto t0 = clock_type::now();
    std::thread receiver([&] {
        size_t got = 0;
        while (got < dst.size()) {
            const ssize_t r = recv(rs, dst.data() + got, dst.size() - got, 0);
            if (r <= 0) {
                break;
            }
            got += size_t(r);
        }
    });
    size_t sent = 0;
    while (sent < src.size()) {
        const ssize_t w = send(cs, src.data() + sent, src.size() - sent, 0);
        if (w <= 0) {
            break;
        }
        sent += size_t(w);
    }
    receiver.join();
    const double s = seconds_since(t0);
    close(cs);
    close(rs);
    close(ls);
    return s;
}

// Pins the calling thread to processor cpu (cpu < 0: leaves it); false
// when the process may not run there.
bool pin_to(int cpu) {
    if (cpu < 0) {
        return true;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Microseconds per round trip of one byte each way over a TCP connection
// on loopback (the floor under any request/reply protocol), the two ends'
// threads on processors cpu_a and cpu_b (< 0: where the scheduler puts
// them); a negative result when they cannot be pinned there. A wakeup on
// another processor costs far more than one on the same, in a VM most of
// all, so the floor is given for both placements.
double tcp_ping_pong(int n, int cpu_a = -1, int cpu_b = -1) {
    cpu_set_t old;
    pthread_getaffinity_np(pthread_self(), sizeof(old), &old);
    if (!pin_to(cpu_a)) {
        return -1.0;
    }
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family      = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len     = sizeof(a);
    if (bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        std::perror("bench_rpc: socket");
        std::exit(1);
    }
    const int cs = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cs, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
        std::perror("bench_rpc: connect");
        std::exit(1);
    }
    const int rs  = accept(ls, nullptr, nullptr);
    const int one = 1;
    setsockopt(cs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(rs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::thread echo([&] {
        (void) pin_to(cpu_b);
        char c;
        for (int i = 0; i < n; ++i) {
            if (recv(rs, &c, 1, 0) != 1 || send(rs, &c, 1, 0) != 1) {
                return;
            }
        }
    });
    const auto t0 = clock_type::now();
    char       c  = 'x';
    for (int i = 0; i < n; ++i) {
        if (send(cs, &c, 1, 0) != 1 || recv(cs, &c, 1, 0) != 1) {
            break;
        }
    }
    const double us = seconds_since(t0) / n * 1e6;
    echo.join();
    close(cs);
    close(rs);
    close(ls);
    pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
    return us;
}

// Upload and download of one tensor of bytes, against TCP. An upload is
// timed until the server holds the bytes (and, with a content cache, has
// kept them): a 1-byte download after it waits for that.
void transfer(ggml_backend_t rpc, size_t mib, int repeats, bool content_cache) {
    const size_t     bytes = mib << 20;
    ggml_init_params ip{};
    ip.mem_size = 4 * ggml_tensor_overhead();
    ip.no_alloc = true;
    ggml_context_ptr        ctx(ggml_init(ip));
    ggml_tensor *           big = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I8, int64_t(bytes));
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), rpc));
    if (!buf) {
        std::fprintf(stderr, "bench_rpc: cannot allocate %zu MiB on the server\n", mib);
        std::exit(1);
    }
    std::vector<uint8_t> src(bytes), dst(bytes);
    for (size_t i = 0; i < bytes; ++i) {
        src[i] = uint8_t(i * 131 + (i >> 12));
    }
    auto upload = [&] {
        const auto t0 = clock_type::now();
        ggml_backend_tensor_set(big, src.data(), 0, bytes);
        uint8_t last = 0;
        ggml_backend_tensor_get(big, &last, bytes - 1, 1);
        return seconds_since(t0);
    };
    std::vector<double> up_new, up_cached, down, tcp;
    for (int r = 0; r < repeats; ++r) {
        src[0] = uint8_t(r + (content_cache ? 128 : 0)); // new content each time
        up_new.push_back(upload());
        if (content_cache) {
            up_cached.push_back(upload());
        }
        const auto t0 = clock_type::now();
        ggml_backend_tensor_get(big, dst.data(), 0, bytes);
        down.push_back(seconds_since(t0));
        if (std::memcmp(src.data(), dst.data(), bytes) != 0) {
            std::fprintf(stderr, "bench_rpc: the download differs from the upload\n");
            std::exit(1);
        }
        tcp.push_back(tcp_copy(src, dst));
    }
    const double mb    = double(bytes) / (1 << 20);
    const double t_tcp = median(tcp);
    std::printf("transfer of %zu MiB, median of %d, server %s\n", mib, repeats,
                content_cache ? "with a content cache of 1 GiB in memory" : "without a content cache (the default)");
    std::printf("  raw TCP copy          %8.1f MiB/s\n", mb / t_tcp);
    std::printf("  upload, new content   %8.1f MiB/s  (%.2f of TCP)\n", mb / median(up_new), t_tcp / median(up_new));
    if (content_cache) {
        std::printf("  upload, cached        %8.1f MiB/s  (%.2f of TCP)\n", mb / median(up_cached),
                    t_tcp / median(up_cached));
    }
    std::printf("  download              %8.1f MiB/s  (%.2f of TCP)\n", mb / median(down), t_tcp / median(down));
}

} // namespace

int main(int argc, char ** argv) {
    std::vector<size_t> sizes;
    for (const char * p = argc > 1 ? argv[1] : "64,1024"; *p != '\0';) {
        char *       end = nullptr;
        const size_t m   = size_t(std::strtoul(p, &end, 10));
        if (end == p || m == 0) {
            std::fprintf(stderr, "usage: bench_rpc [MiB[,MiB...]] [repeats]\n");
            return 1;
        }
        sizes.push_back(m);
        p = *end == ',' ? end + 1 : end;
    }
    const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;

    // Two servers: without a content cache (the default, as in ggml) and
    // with one in memory.
    loom_rpc_server_params p{};
    p.endpoint               = "127.0.0.1:0";
    p.token                  = "bench-token";
    p.n_threads              = 1;
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    p.cache_bytes            = size_t(1) << 30;
    loom_rpc_server_t cached = loom_rpc_server_start(&p);
    if (server == nullptr || cached == nullptr) {
        return 1;
    }
    loom_rpc_set_token(p.token);
    const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
    const std::string endpoint_cached = "127.0.0.1:" + std::to_string(loom_rpc_server_port(cached));
    ggml_backend_ptr  rpc(ggml_backend_rpc_init(endpoint.c_str(), 0));
    ggml_backend_ptr  rpc_cached(ggml_backend_rpc_init(endpoint_cached.c_str(), 0));
    ggml_backend_ptr  cpu(ggml_backend_cpu_init());
    ggml_backend_cpu_set_n_threads(cpu.get(), 1);
    if (!rpc || !rpc_cached) {
        return 1;
    }
    for (size_t mib : sizes) {
        transfer(rpc.get(), mib, repeats, false);
        transfer(rpc_cached.get(), mib, repeats, true);
    }
    rpc_cached.reset();
    loom_rpc_server_stop(cached);

    // A small graph: (a + b) * s on 256 floats, in a context of its own per backend.
    const int n_calls = 2000;
    enum class Mode { same, alternate, step, stream, get, set };
    auto latency = [&](ggml_backend_t be, Mode mode) {
        ggml_init_params gp{};
        gp.mem_size = 16 * ggml_tensor_overhead() + 2 * ggml_graph_overhead();
        gp.no_alloc = true;
        ggml_context_ptr gctx(ggml_init(gp));
        ggml_tensor *    a  = ggml_new_tensor_1d(gctx.get(), GGML_TYPE_F32, 256);
        ggml_tensor *    b  = ggml_new_tensor_1d(gctx.get(), GGML_TYPE_F32, 256);
        ggml_tensor *    y  = ggml_scale(gctx.get(), ggml_add(gctx.get(), a, b), 2.0f);
        ggml_tensor *    y2 = ggml_scale(gctx.get(), ggml_add(gctx.get(), a, b), 3.0f);
        ggml_cgraph *    g1 = ggml_new_graph(gctx.get());
        ggml_build_forward_expand(g1, y);
        ggml_cgraph * g2 = ggml_new_graph(gctx.get());
        ggml_build_forward_expand(g2, y2);
        ggml_backend_buffer_ptr gb(ggml_backend_alloc_ctx_tensors(gctx.get(), be));
        ggml_backend_buffer_clear(gb.get(), 0);
        std::vector<float>  in(256, 1.5f), out(256);
        std::vector<double> per;
        for (int r = 0; r < repeats; ++r) {
            const auto t0 = clock_type::now();
            for (int i = 0; i < n_calls; ++i) {
                if (mode == Mode::stream) {
                    // As a scheduler's step: input, computation and output
                    // issued on the stream, one wait at the end.
                    in[0] = float(i);
                    ggml_backend_tensor_set_async(be, a, in.data(), 0, ggml_nbytes(a));
                    ggml_backend_graph_compute_async(be, g1);
                    ggml_backend_tensor_get_async(be, y, out.data(), 0, ggml_nbytes(y));
                    ggml_backend_synchronize(be);
                    continue;
                }
                if (mode == Mode::get) {
                    ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
                    continue;
                }
                if (mode == Mode::set) {
                    in[0] = float(i);
                    ggml_backend_tensor_set(a, in.data(), 0, ggml_nbytes(a));
                    ggml_backend_synchronize(be);
                    continue;
                }
                if (mode == Mode::step) {
                    in[0] = float(i);
                    ggml_backend_tensor_set(a, in.data(), 0, ggml_nbytes(a));
                }
                ggml_backend_graph_compute(be, mode == Mode::alternate && (i & 1) ? g2 : g1);
                if (mode == Mode::step) {
                    ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
                }
            }
            per.push_back(seconds_since(t0) / n_calls * 1e6);
        }
        return median(per);
    };
    std::vector<double> pings, pings_same, pings_apart;
    for (int r = 0; r < repeats; ++r) {
        pings.push_back(tcp_ping_pong(n_calls));
        pings_same.push_back(tcp_ping_pong(n_calls, 0, 0));
        pings_apart.push_back(tcp_ping_pong(n_calls, 0, 1));
    }
    const double ping   = median(pings);
    const double local  = latency(cpu.get(), Mode::same);
    const double same   = latency(rpc.get(), Mode::same);
    const double resend = latency(rpc.get(), Mode::alternate);
    const double step   = latency(rpc.get(), Mode::step);
    const double stream = latency(rpc.get(), Mode::stream);
    const double get1   = latency(rpc.get(), Mode::get);
    const double set1   = latency(rpc.get(), Mode::set);
    std::printf("  get alone %.1f us, set + synchronize %.1f us\n", get1, set1);
    std::printf("graph (a + b) * s on 256 floats, 2 nodes, %d calls, median of %d\n", n_calls, repeats);
    std::printf("  local CPU             %8.1f us\n", local);
    std::printf("  TCP 1-byte round trip %8.1f us (threads on one processor %.1f us, on two %.1f us; "
                "negative: not allowed there)\n",
                ping, median(pings_same), median(pings_apart));
    std::printf("  RPC, graph cached     %8.1f us  (%.1f round trips)\n", same, same / ping);
    std::printf("  RPC, graph re-sent    %8.1f us  (%.1f round trips)\n", resend, resend / ping);
    std::printf("  RPC, set + compute + get %5.1f us  (%.1f round trips)\n", step, step / ping);
    std::printf("  RPC, the same issued asynchronously, one synchronize %5.1f us  (%.1f round trips)\n", stream,
                stream / ping);

    rpc.reset();
    loom_rpc_server_stop(server);
    return 0;
}
