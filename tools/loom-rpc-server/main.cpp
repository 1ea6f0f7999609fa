// loom-rpc-server: exposes this machine's devices to loom's RPC backend.
//
//   LOOM_RPC_TOKEN=<secret> loom-rpc-server [-H host] [-p port] [-d dev,...]
//                  [-t threads] [-c cache_dir] [--cache-mib n] [--tls-cert f --tls-key f]
//   loom-rpc-server --protocol ggml [-H host] [-p port] [-d dev,...] [-t threads] [-c cache_dir]
//                  (ggml's RPC protocol, for llama.cpp's --rpc; no token)
//
// Binds to 127.0.0.1 unless -H says otherwise. Stops on SIGINT / SIGTERM.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-rpc.h"

namespace {

void usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s [-H host] [-p port] [-d dev1,dev2] [-t threads] [-c cache_dir] [--cache-mib n] "
                 "[--tls-cert pem --tls-key pem] [--protocol loom|ggml]\n"
                 "  -H host       address to bind (default 127.0.0.1; 0.0.0.0 exposes the server to the network)\n"
                 "  -p port       port (default 50052)\n"
                 "  -d devices    comma-separated device names to expose (default CPU)\n"
                 "  -t threads    threads of CPU backends\n"
                 "  -c dir        keep uploaded tensors by content hash in dir (and 1 GiB of them in memory)\n"
                 "  --cache-mib n keep up to n MiB of uploaded tensors in memory by content hash, so that\n"
                 "                content a client sent before is not sent again (default: none without -c)\n"
                 "  --tls-cert, --tls-key  serve TLS only (or LOOM_RPC_TLS_CERT / LOOM_RPC_TLS_KEY)\n"
                 "  --protocol p  loom (default) or ggml: ggml 0.25.1's RPC protocol, for programs built on ggml\n"
                 "                (llama.cpp's --rpc); it has no authentication: keep it on loopback or use TLS.\n"
                 "                -c dir is then ggml's file cache.\n"
                 "The token is read from LOOM_RPC_TOKEN and is required with loom's protocol.\n",
                 argv0);
}

} // namespace

int main(int argc, char ** argv) {
    std::string host = "127.0.0.1", port = "50052", devices, cache_dir, protocol = "loom";
    const char *tls_cert = std::getenv("LOOM_RPC_TLS_CERT"), *tls_key = std::getenv("LOOM_RPC_TLS_KEY");
    size_t      n_threads = 0, cache_mib = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a    = argv[i];
        const bool        more = i + 1 < argc;
        if (a == "-H" && more) {
            host = argv[++i];
        } else if (a == "-p" && more) {
            port = argv[++i];
        } else if (a == "-d" && more) {
            devices = argv[++i];
        } else if (a == "-t" && more) {
            n_threads = size_t(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "-c" && more) {
            cache_dir = argv[++i];
        } else if (a == "--cache-mib" && more) {
            cache_mib = size_t(std::strtoull(argv[++i], nullptr, 10));
        } else if (a == "--tls-cert" && more) {
            tls_cert = argv[++i];
        } else if (a == "--tls-key" && more) {
            tls_key = argv[++i];
        } else if (a == "--protocol" && more) {
            protocol = argv[++i];
        } else {
            usage(argv[0]);
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    if (protocol != "loom" && protocol != "ggml") {
        usage(argv[0]);
        return 2;
    }
    const char * token = std::getenv("LOOM_RPC_TOKEN");
    if (protocol == "loom" && (token == nullptr || token[0] == '\0')) {
        std::fprintf(stderr, "loom-rpc-server: set LOOM_RPC_TOKEN to the token clients must present\n");
        return 2;
    }
    ggml_backend_load_all();
    std::vector<ggml_backend_dev_t> devs;
    for (size_t start = 0; start < devices.size();) {
        size_t            end  = devices.find(',', start);
        const std::string name = devices.substr(start, end == std::string::npos ? std::string::npos : end - start);
        ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
        if (dev == nullptr) {
            std::fprintf(stderr, "loom-rpc-server: no device named %s\n", name.c_str());
            return 2;
        }
        devs.push_back(dev);
        start = end == std::string::npos ? devices.size() : end + 1;
    }
    const std::string endpoint = host + ":" + port;

    // Signals are taken by sigwait on this thread only.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    loom_rpc_server_params p{};
    p.endpoint      = endpoint.c_str();
    p.token         = token;
    p.cache_dir     = cache_dir.empty() ? nullptr : cache_dir.c_str();
    p.n_threads     = n_threads;
    p.cache_bytes   = cache_mib << 20;
    p.n_devices     = devs.size();
    p.devices       = devs.empty() ? nullptr : devs.data();
    p.tls_cert_path = tls_cert;
    p.tls_key_path  = tls_key;
    p.protocol      = protocol.c_str();
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    if (server == nullptr) {
        return 1;
    }
    std::printf("loom-rpc-server: listening on %s:%d\n", host.c_str(), loom_rpc_server_port(server));
    std::printf("  protocol: %s\n", protocol.c_str());
    for (size_t i = 0; i < (devs.empty() ? 1 : devs.size()); ++i) {
        std::printf("  device %zu: %s\n", i, devs.empty() ? "CPU" : ggml_backend_dev_name(devs[i]));
    }
    std::fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    std::printf("loom-rpc-server: stopping\n");
    loom_rpc_server_stop(server);
    return 0;
}
