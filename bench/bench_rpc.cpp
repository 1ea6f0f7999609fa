// RPC backend over loopback, beside a raw TCP copy of the same bytes in the
// same run:
//  - tensor upload (new content: SHA-256 + send + server-side check of the
//    hash; and content the server already holds) and download, MiB/s,
//    against one TCP socket pair on 127.0.0.1 moving the same bytes;
//  - the round trip of a small graph computation (the graph cached on the
//    server, and re-sent each time), against the same graph on the local CPU
//    and a 1-byte TCP ping-pong on loopback.
// Medians of the repeats (the machine is shared; single runs are noisy).
//
//   bench_rpc [MiB] [repeats]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

// Microseconds per round trip of one byte each way over a TCP connection
// on loopback (the floor under any request/reply protocol).
double tcp_ping_pong(int n) {
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
    return us;
}

} // namespace

int main(int argc, char ** argv) {
    const size_t mib     = argc > 1 ? size_t(std::atoi(argv[1])) : 64;
    const int    repeats = argc > 2 ? std::atoi(argv[2]) : 7;
    const size_t bytes   = mib << 20;

    loom_rpc_server_params p{};
    p.endpoint               = "127.0.0.1:0";
    p.token                  = "bench-token";
    p.n_threads              = 1;
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    if (server == nullptr) {
        return 1;
    }
    loom_rpc_set_token(p.token);
    const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
    ggml_backend_ptr  rpc(ggml_backend_rpc_init(endpoint.c_str(), 0));
    ggml_backend_ptr  cpu(ggml_backend_cpu_init());
    ggml_backend_cpu_set_n_threads(cpu.get(), 1);

    ggml_init_params ip{};
    ip.mem_size = 16 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc = true;
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_tensor *    big = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, int64_t(bytes / 4));
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), rpc.get()));

    std::vector<uint8_t> src(bytes), dst(bytes);
    for (size_t i = 0; i < bytes; ++i) {
        src[i] = uint8_t(i * 131 + (i >> 12));
    }
    std::vector<double> up_new, up_cached, down, tcp;
    for (int r = 0; r < repeats; ++r) {
        src[0] = uint8_t(r); // new content each time
        auto t0 = clock_type::now();
        ggml_backend_tensor_set(big, src.data(), 0, bytes);
        up_new.push_back(seconds_since(t0));
        t0 = clock_type::now();
        ggml_backend_tensor_set(big, src.data(), 0, bytes);
        up_cached.push_back(seconds_since(t0));
        t0 = clock_type::now();
        ggml_backend_tensor_get(big, dst.data(), 0, bytes);
        down.push_back(seconds_since(t0));
        if (std::memcmp(src.data(), dst.data(), bytes) != 0) {
            std::fprintf(stderr, "bench_rpc: the download differs from the upload\n");
            return 1;
        }
        tcp.push_back(tcp_copy(src, dst));
    }
    const double mb = double(bytes) / (1 << 20);
    const double t_tcp = median(tcp);
    std::printf("transfer of %zu MiB, median of %d\n", mib, repeats);
    std::printf("  raw TCP copy          %8.1f MiB/s\n", mb / t_tcp);
    std::printf("  upload, new content   %8.1f MiB/s  (%.2f of TCP)\n", mb / median(up_new), t_tcp / median(up_new));
    std::printf("  upload, cached        %8.1f MiB/s  (%.2f of TCP)\n", mb / median(up_cached),
                t_tcp / median(up_cached));
    std::printf("  download              %8.1f MiB/s  (%.2f of TCP)\n", mb / median(down), t_tcp / median(down));

    // A small graph: (a + b) * s on 256 floats, in a context of its own per backend.
    const int n_calls = 2000;
    auto      latency = [&](ggml_backend_t be, bool alternate) {
        ggml_init_params gp = ip;
        gp.mem_size         = 16 * ggml_tensor_overhead() + 2 * ggml_graph_overhead();
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
        std::vector<double> per;
        for (int r = 0; r < repeats; ++r) {
            const auto t0 = clock_type::now();
            for (int i = 0; i < n_calls; ++i) {
                ggml_backend_graph_compute(be, alternate && (i & 1) ? g2 : g1);
            }
            per.push_back(seconds_since(t0) / n_calls * 1e6);
        }
        return median(per);
    };
    std::vector<double> pings;
    for (int r = 0; r < repeats; ++r) {
        pings.push_back(tcp_ping_pong(n_calls));
    }
    const double local = latency(cpu.get(), false);
    const double same  = latency(rpc.get(), false);
    const double resend = latency(rpc.get(), true);
    std::printf("graph (a + b) * s on 256 floats, 2 nodes, %d calls, median of %d\n", n_calls, repeats);
    std::printf("  local CPU             %8.1f us\n", local);
    std::printf("  TCP 1-byte round trip %8.1f us\n", median(pings));
    std::printf("  RPC, graph cached     %8.1f us\n", same);
    std::printf("  RPC, graph re-sent    %8.1f us\n", resend);

    buf.reset();
    rpc.reset();
    loom_rpc_server_stop(server);
    return 0;
}
