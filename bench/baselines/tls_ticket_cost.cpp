// tls_ticket_cost: what OpenSSL 3 spends on the server side of a full TLS 1.3 handshake with A
// session tickets against B (ServerConfig::tickets), client and server in one process over a BIO
// pair, no sockets. The two counts alternate handshake by handshake, so a machine whose speed
// drifts (a shared VM) slows both alike; the figure is each batch's ratio A / B, median [min-max].
//
//   tls_ticket_cost --cert CHAIN.pem --key KEY.pem [--tickets-a 1] [--tickets-b 2]
//                   [--handshakes 1000] [--batch 50] [--json]
//
// Server CPU: the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) around the server's SSL_new,
// SSL_do_handshake and SSL_free calls; the client's work is not counted. The client offers what
// bench/studies/tls.py's clients offer (TLS 1.3, TLS_AES_128_GCM_SHA256, X25519) and reads the
// tickets before the next handshake. Exit 1: the certificate or key cannot be used or a
// handshake fails; 2: bad flags.
#include "tls_common.hpp"

#include <algorithm>
#include <ctime>
#include <vector>

namespace {

constexpr const char* kTool = "tls_ticket_cost";

double thread_cpu_us() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

/// One full handshake of a fresh client against a fresh server of `sctx`: the server's CPU (us).
double handshake(SSL_CTX* sctx, SSL_CTX* cctx) {
    double t0 = thread_cpu_us();
    SSL* s = SSL_new(sctx);
    double us = thread_cpu_us() - t0;
    SSL* c = SSL_new(cctx);
    BIO *sb = nullptr, *cb = nullptr;
    if (s == nullptr || c == nullptr || BIO_new_bio_pair(&sb, 64 * 1024, &cb, 64 * 1024) != 1)
        baseline::die_ssl(kTool, "SSL_new / BIO_new_bio_pair");
    SSL_set_bio(s, sb, sb);
    SSL_set_bio(c, cb, cb);
    SSL_set_accept_state(s);
    SSL_set_connect_state(c);
    int sr = 0, cr = 0;
    for (int step = 0; step < 16 && (sr != 1 || cr != 1); ++step) {
        if (cr != 1) cr = SSL_do_handshake(c);
        if (sr != 1) {
            t0 = thread_cpu_us();
            sr = SSL_do_handshake(s);
            us += thread_cpu_us() - t0;
        }
    }
    if (sr != 1 || cr != 1) baseline::die_ssl(kTool, "handshake");
    char byte = 0;
    (void)SSL_read(c, &byte, 1); // the client takes the tickets (then wants more bytes)
    t0 = thread_cpu_us();
    SSL_free(s);
    us += thread_cpu_us() - t0;
    SSL_free(c);
    return us;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string cert, key;
    unsigned a = 1, b = 2;
    int handshakes = 1000, batch = 50;
    bool json = false;
    cli::App app{"Server CPU of a full TLS 1.3 handshake in OpenSSL with A session tickets against "
                 "B, alternating, in one process (no sockets).",
                 kTool};
    app.add_option("--cert", cert, "certificate chain (PEM)")
        ->required()
        ->check(tools::non_empty());
    app.add_option("--key", key, "private key (PEM)")->required()->check(tools::non_empty());
    app.add_option("--tickets-a", a, "tickets after a full handshake, A")
        ->check(tools::whole(0, 16))
        ->capture_default_str();
    app.add_option("--tickets-b", b, "tickets after a full handshake, B")
        ->check(tools::whole(0, 16))
        ->capture_default_str();
    app.add_option("--handshakes", handshakes, "handshakes of each, alternating")
        ->check(tools::whole(1, 1000000))
        ->capture_default_str();
    app.add_option("--batch", batch, "handshakes of each per ratio")
        ->check(tools::whole(1, 1000000))
        ->capture_default_str();
    app.add_flag("--json", json, "print one JSON object");
    if (auto code = tools::parse_command_line(app, argc, argv, kTool)) return *code;

    SSL_CTX* sa = baseline::tls_server_context(kTool, cert, key, 0);
    SSL_CTX* sb = baseline::tls_server_context(kTool, cert, key, 0);
    SSL_CTX_set_num_tickets(sa, a);
    SSL_CTX_set_num_tickets(sb, b);
    SSL_CTX* cc = SSL_CTX_new(TLS_client_method());
    if (cc == nullptr || SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_ciphersuites(cc, "TLS_AES_128_GCM_SHA256") != 1 ||
        SSL_CTX_set1_groups_list(cc, "X25519") != 1)
        baseline::die_ssl(kTool, "client context");
    (void)handshake(sa, cc); // (first-use costs: neither side's figure)
    (void)handshake(sb, cc);
    std::vector<double> ratios;
    double sum_a = 0, sum_b = 0, batch_a = 0, batch_b = 0;
    for (int i = 0; i < handshakes; ++i) {
        const bool a_first = i % 2 == 0; // A B, B A, ...
        const double first = handshake(a_first ? sa : sb, cc);
        const double second = handshake(a_first ? sb : sa, cc);
        batch_a += a_first ? first : second;
        batch_b += a_first ? second : first;
        if ((i + 1) % batch == 0 || i + 1 == handshakes) {
            ratios.push_back(batch_a / batch_b);
            sum_a += batch_a;
            sum_b += batch_b;
            batch_a = batch_b = 0;
        }
    }
    std::sort(ratios.begin(), ratios.end());
    const double median = ratios[ratios.size() / 2];
    const double us_a = sum_a / handshakes, us_b = sum_b / handshakes;
    if (json)
        std::printf("{\"tickets_a\": %u, \"tickets_b\": %u, \"handshakes\": %d, \"us_a\": %.2f, "
                    "\"us_b\": %.2f, \"ratio_median\": %.4f, \"ratio_min\": %.4f, "
                    "\"ratio_max\": %.4f, \"batches\": %zu}\n",
                    a, b, handshakes, us_a, us_b, median, ratios.front(), ratios.back(),
                    ratios.size());
    else
        std::printf("server CPU per full handshake: tickets %u: %.1f us, tickets %u: %.1f us; "
                    "%u / %u per batch of %d: %.3fx [%.3f-%.3f] (%zu batches)\n",
                    a, us_a, b, us_b, a, b, batch, median, ratios.front(), ratios.back(),
                    ratios.size());
    SSL_CTX_free(sa);
    SSL_CTX_free(sb);
    SSL_CTX_free(cc);
    return 0;
}
