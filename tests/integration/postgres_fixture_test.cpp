// The PostgreSQL test server (tests/support/postgres.hpp) against libpq, its own client: both
// listeners with SELECT 1, a wrong password refused with the server's message, restart and crash
// with a new connection served after, and nothing left behind (no process tied to its directory,
// no directory), even when the test process dies without tearing it down. No galay code runs
// here, so there is no backend to parameterise over.
#include "support/postgres.hpp"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace {

using galay::test::PostgresServer;
using galay::test::processes_in;

#define SKIP_WITHOUT_POSTGRES()                                                                    \
    if (auto why = galay::test::postgres_missing()) GTEST_SKIP() << "SKIP: " << *why

struct Conn {
    explicit Conn(const std::string& conninfo)
        : pg(PQconnectdb(conninfo.c_str())) {}
    ~Conn() { PQfinish(pg); }
    bool ok() const { return PQstatus(pg) == CONNECTION_OK; }
    std::string error() const { return PQerrorMessage(pg); }
    /// The one value of a one-row query, or "ERROR: <message>".
    std::string value(const char* sql) {
        std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(pg, sql), PQclear);
        if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1)
            return "ERROR: " + std::string(PQerrorMessage(pg));
        return PQgetisnull(r.get(), 0, 0) ? "NULL" : PQgetvalue(r.get(), 0, 0);
    }
    PGconn* pg;
};

bool gone(pid_t pid) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return errno == ESRCH;
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, 30'000);
    ::close(fd);
    return rc > 0;
}

TEST(PostgresFixture, serves_select_1_on_the_socket_and_on_tcp_with_the_password) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer pg;
    ASSERT_GT(pg.port(), 0);
    Conn sock(pg.socket_conninfo());
    ASSERT_TRUE(sock.ok()) << sock.error();
    EXPECT_EQ(sock.value("SELECT 1"), "1");
    EXPECT_EQ(sock.value("SELECT inet_server_addr()"), "NULL"); // a Unix socket
    Conn tcp(pg.tcp_conninfo());
    ASSERT_TRUE(tcp.ok()) << tcp.error();
    EXPECT_EQ(tcp.value("SELECT 1"), "1");
    EXPECT_EQ(tcp.value("SELECT inet_server_addr()"), "127.0.0.1");
    EXPECT_EQ(tcp.value("SELECT inet_server_port()"), std::to_string(pg.port()));
    EXPECT_EQ(tcp.value("SELECT current_setting('data_directory')"), pg.data_dir());
    // Not root (PostgreSQL refuses it), a process group of its own, background processes beside.
    std::ifstream status("/proc/" + std::to_string(pg.pid()) + "/status");
    std::string uid;
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Uid:", 0) == 0) std::istringstream(line.substr(4)) >> uid;
    EXPECT_NE(uid, "");
    EXPECT_NE(uid, "0");
    EXPECT_EQ(::getpgid(pg.pid()), pg.pid());
    EXPECT_GE(pg.processes().size(), 2u);
}

TEST(PostgresFixture, a_wrong_password_fails_with_the_servers_message) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer pg;
    Conn bad(pg.tcp_conninfo("not-the-password"));
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.error().find("password authentication failed for user \"galay\""),
              std::string::npos)
        << bad.error();
    // No password at all over TCP: SCRAM is asked for, the socket stays trusted.
    Conn none(pg.tcp_conninfo("").substr(0, pg.tcp_conninfo("").find(" password=")));
    EXPECT_FALSE(none.ok());
    EXPECT_NE(none.error().find("password"), std::string::npos) << none.error();
}

TEST(PostgresFixture, restart_ends_old_connections_and_serves_new_ones_on_the_same_port) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer pg;
    const int port = pg.port();
    const pid_t first = pg.pid();
    Conn before(pg.tcp_conninfo());
    ASSERT_TRUE(before.ok()) << before.error();
    ASSERT_EQ(before.value("SELECT 1"), "1");
    pg.restart();
    EXPECT_EQ(pg.port(), port);
    EXPECT_NE(pg.pid(), first);
    EXPECT_TRUE(gone(first));
    // The old connection was ended by the shutdown: its next query fails and says why.
    EXPECT_EQ(before.value("SELECT 1").rfind("ERROR: ", 0), 0u);
    EXPECT_NE(PQstatus(before.pg), CONNECTION_OK);
    Conn after(pg.tcp_conninfo());
    ASSERT_TRUE(after.ok()) << after.error();
    EXPECT_EQ(after.value("SELECT 2"), "2");
}

TEST(PostgresFixture, after_a_crash_start_recovers_and_serves_again) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer pg;
    Conn before(pg.socket_conninfo());
    ASSERT_TRUE(before.ok()) << before.error();
    const std::vector<pid_t> procs = pg.processes();
    pg.kill();
    EXPECT_FALSE(pg.running());
    for (pid_t p : procs)
        EXPECT_TRUE(gone(p)) << p;
    EXPECT_TRUE(processes_in(pg.dir()).empty());
    EXPECT_EQ(before.value("SELECT 1").rfind("ERROR: ", 0), 0u);
    pg.start();
    Conn after(pg.socket_conninfo());
    ASSERT_TRUE(after.ok()) << after.error();
    EXPECT_EQ(after.value("SELECT 3"), "3");
}

TEST(PostgresFixture, teardown_with_a_client_connected_leaves_no_process_and_no_directory) {
    SKIP_WITHOUT_POSTGRES();
    std::string dir;
    std::vector<pid_t> procs;
    auto client = std::make_unique<Conn>("");
    {
        PostgresServer pg;
        dir = pg.dir();
        client = std::make_unique<Conn>(pg.tcp_conninfo());
        ASSERT_TRUE(client->ok()) << client->error();
        ASSERT_EQ(client->value("SELECT 1"), "1");
        procs = pg.processes();
        ASSERT_FALSE(processes_in(dir).empty());
    }
    EXPECT_TRUE(processes_in(dir).empty());
    EXPECT_FALSE(std::filesystem::exists(dir));
    for (pid_t p : procs)
        EXPECT_TRUE(gone(p)) << p;
    EXPECT_EQ(client->value("SELECT 1").rfind("ERROR: ", 0), 0u);
}

// A test process that dies without running a destructor: its postmaster gets SIGKILL from the
// kernel (parent-death signal), the backends leave after it, and the next server started removes
// the directory.
TEST(PostgresFixture, a_test_process_killed_takes_its_server_along) {
    SKIP_WITHOUT_POSTGRES();
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(fds[0]);
        try {
            auto* pg = new PostgresServer(); // never destroyed
            Conn c(pg->socket_conninfo());
            const std::string msg = std::to_string(pg->pid()) + " " + pg->dir() + "\n";
            if (!c.ok() || ::write(fds[1], msg.data(), msg.size()) < 0) ::_exit(3);
        } catch (...) {
            ::_exit(2);
        }
        ::raise(SIGKILL);
    }
    ::close(fds[1]);
    std::string msg;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        msg.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child failed to start its server: " << status;
    const pid_t postmaster = std::atoi(msg.c_str());
    const std::string dir = msg.substr(msg.find(' ') + 1, msg.find('\n') - msg.find(' ') - 1);
    ASSERT_GT(postmaster, 0) << msg;
    EXPECT_TRUE(gone(postmaster));
    for (pid_t p : processes_in(dir)) // backends see their postmaster gone and leave
        EXPECT_TRUE(gone(p)) << p;
    ASSERT_TRUE(std::filesystem::exists(dir));
    PostgresServer next; // sweeps what the dead test left
    EXPECT_FALSE(std::filesystem::exists(dir));
}

} // namespace
