// A real PostgreSQL server for a test: its own cluster in a fresh directory, listening on a Unix
// socket there and on a free loopback TCP port, always torn down.
//
//     if (auto why = galay::test::postgres_missing()) GTEST_SKIP() << "SKIP: " << *why;
//     galay::test::PostgresServer pg;                  // initdb, start, wait until it accepts
//     PGconn* c = PQconnectdb(pg.tcp_conninfo().c_str());  // password-authenticated (SCRAM)
//     PGconn* u = PQconnectdb(pg.socket_conninfo().c_str()); // Unix socket (trust)
//     pg.restart();                                    // fast shutdown, start again, same port
//
// The server runs as a non-root user (PostgreSQL refuses root): as `postgres` when the test runs
// as root, else as the test's own user. The directory (`galay-pg-<test pid>-XXXXXX` under $TMPDIR
// or /tmp) is owned by that user. The postmaster is started in a process group of its own with a
// parent-death signal (SIGKILL), so a test that crashes takes its server with it (the backends
// leave when they see their postmaster gone); the next server started sweeps directories whose
// test process is gone. The parent-death signal follows the thread that started the server:
// start it from the thread that lives as long as it (the test's main thread).
//
// Every wait is bounded: readiness is a PQping loop with a deadline that also watches the
// postmaster's exit, shutdown waits on a pidfd. A failure throws std::runtime_error with the end of
// the server's log; no binaries throws nothing: postgres_missing() says why first.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace galay::test {

/// Why no PostgreSQL server can be started here (no server binaries, no user to run them as), or
/// nullopt when one can.
std::optional<std::string> postgres_missing();

/// The directory holding `initdb` and `postgres`: $GALAY_PG_BINDIR, else the newest
/// /usr/lib/postgresql/<version>/bin (Debian), else `pg_config --bindir`; empty when none has them.
std::string postgres_bindir();

/// The processes tied to `dir`: working directory inside it or `dir` on their command line (a
/// postmaster's cwd is its data directory; backends inherit it). For leak checks.
std::vector<pid_t> processes_in(const std::string& dir);

class PostgresServer {
public:
    struct Options {
        std::string role = "galay"; ///< a superuser, password-authenticated over TCP
        std::string password = "galay-test-password";
        int max_connections = 100;
        std::chrono::seconds ready_timeout{60}; ///< for initdb, and for each start to accept
    };

    PostgresServer()
        : PostgresServer(Options{}) {}
    explicit PostgresServer(Options opts);
    PostgresServer(const PostgresServer&) = delete;
    PostgresServer& operator=(const PostgresServer&) = delete;
    ~PostgresServer(); ///< stop() (SIGKILL if it does not end), then the directory removed

    const std::string& dir() const noexcept { return dir_; }
    const std::string& data_dir() const noexcept { return data_; }
    const std::string& socket_dir() const noexcept { return dir_; }
    const Options& options() const noexcept { return opts_; }
    int port() const noexcept { return port_; }
    pid_t pid() const noexcept { return pid_; } ///< the postmaster, 0 when stopped
    bool running() const noexcept { return pid_ > 0; }
    std::string log() const; ///< the server's log so far (stderr of every start)

    /// "host=<dir> port=<port> dbname=postgres user=<role>" (trust on the socket).
    std::string socket_conninfo() const;
    /// "host=127.0.0.1 port=<port> dbname=postgres user=<role> password=<password>"
    /// (`password` overrides the right one, for a test of a wrong one).
    std::string tcp_conninfo(std::optional<std::string> password = std::nullopt) const;

    /// Fast shutdown (SIGINT: clients disconnected, no wait for them); SIGKILL to the postmaster
    /// and its children when it has not ended within `timeout`. A no-op when stopped.
    void stop(std::chrono::seconds timeout = std::chrono::seconds(30));
    /// SIGKILL to the postmaster and every child, waiting until all have ended (a crash).
    void kill();
    /// Start again on the same directory and port, returning once it accepts.
    void start();
    void restart() {
        stop();
        start();
    }

    /// The postmaster and its children (backends, background workers), or none when stopped.
    std::vector<pid_t> processes() const;

private:
    std::string log_path() const;
    void start_on(int port); // throws; sets pid_
    void wait_ready();       // throws with the log's end when it exits or never accepts

    Options opts_;
    std::string dir_, data_;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
    int port_ = 0;
    pid_t pid_ = 0;
    std::string bindir_;
};

} // namespace galay::test
