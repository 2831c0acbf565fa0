// The PostgreSQL test server of postgres.hpp: initdb, start as a non-root user, readiness,
// shutdown, and the sweep of what a crashed test left.
#include "support/postgres.hpp"

#include <libpq-fe.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace galay::test {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool executable(const fs::path& p) {
    return ::access(p.c_str(), X_OK) == 0;
}

bool has_server(const fs::path& dir) {
    return executable(dir / "initdb") && executable(dir / "postgres");
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string tail(const std::string& text, std::size_t n = 1500) {
    return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string errno_text(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

/// The user the server runs as: `postgres` when we are root, else ourselves.
bool server_identity(uid_t& uid, gid_t& gid) {
    if (::geteuid() != 0) {
        uid = ::geteuid();
        gid = ::getegid();
        return true;
    }
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) return false;
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    return true;
}

int pidfd_open(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

/// Waits until `pid` (any process, not only a child) has ended or `timeout` passed.
bool wait_gone(pid_t pid, std::chrono::milliseconds timeout) {
    const int fd = pidfd_open(pid);
    if (fd < 0) return errno == ESRCH; // already gone
    pollfd p{fd, POLLIN, 0};
    int rc;
    do {
        rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    } while (rc < 0 && errno == EINTR);
    ::close(fd);
    return rc > 0;
}

/// Direct children of `pid` (every thread's list).
std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::ifstream in(task.path() / "children");
        pid_t c;
        while (in >> c)
            out.push_back(c);
    }
    return out;
}

int free_loopback_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) throw std::runtime_error(errno_text("socket"));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        const std::string e = errno_text("bind 127.0.0.1:0");
        ::close(s);
        throw std::runtime_error(e);
    }
    ::close(s);
    return ntohs(a.sin_port);
}

/// Forks `argv` in a process group of its own as uid/gid (when we are root), in `cwd`, stdout
/// and stderr appended to `log`, no descriptor of ours inherited. With `tie_to_parent` it gets
/// SIGKILL when the thread that forked it ends.
pid_t spawn(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log,
            uid_t uid, gid_t gid, bool tie_to_parent) {
    std::vector<char*> args;
    for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    const bool root = ::geteuid() == 0;
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(errno_text("fork"));
    if (pid == 0) { // only async-signal-safe calls from here on
        ::setpgid(0, 0);
        if (root && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0))
            ::_exit(126);
        // Set after the change of user, which clears it.
        if (tie_to_parent && (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent))
            ::_exit(126);
        const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out < 0 || in < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0 ||
            ::chdir(cwd.c_str()) != 0)
            ::_exit(126);
        ::syscall(SYS_close_range, 3U, ~0U, 0U);
        ::execve(args[0], args.data(), environ);
        ::_exit(127);
    }
    return pid;
}

/// Reaps our child `pid` within `timeout`; its wait status, or nullopt when it is still running.
std::optional<int> reap(pid_t pid, std::chrono::milliseconds timeout) {
    if (!wait_gone(pid, timeout)) return std::nullopt;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "status " + std::to_string(status);
}

/// SIGKILL to every process in `pids`, then waits (bounded) until each has ended.
void kill_and_wait(const std::vector<pid_t>& pids) {
    for (pid_t p : pids)
        ::kill(p, SIGKILL);
    for (pid_t p : pids)
        (void)wait_gone(p, std::chrono::seconds(30));
}

/// Removes the directories of servers whose test process has ended without tearing them down.
void sweep_stale(const fs::path& base) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("galay-pg-", 0) != 0) continue;
        const long owner = std::strtol(name.c_str() + 9, nullptr, 10);
        if (owner <= 0 || owner == ::getpid() || fs::exists("/proc/" + std::to_string(owner)))
            continue;
        kill_and_wait(processes_in(e.path().string()));
        fs::remove_all(e.path(), ec);
    }
}

fs::path temp_base() {
    const char* t = std::getenv("TMPDIR");
    return t != nullptr && *t ? t : "/tmp";
}

} // namespace

std::string postgres_bindir() {
    if (const char* env = std::getenv("GALAY_PG_BINDIR"); env != nullptr && *env)
        return has_server(env) ? env : "";
    std::vector<std::pair<int, fs::path>> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
        const int v = std::atoi(e.path().filename().c_str());
        if (v > 0 && has_server(e.path() / "bin")) found.emplace_back(v, e.path() / "bin");
    }
    if (!found.empty()) return std::max_element(found.begin(), found.end())->second;
    if (FILE* p = ::popen("pg_config --bindir 2>/dev/null", "r")) {
        char buf[512] = {};
        const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
        ::pclose(p);
        std::string dir = got ? buf : "";
        while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' '))
            dir.pop_back();
        if (!dir.empty() && has_server(dir)) return dir;
    }
    return "";
}

std::optional<std::string> postgres_missing() {
    if (postgres_bindir().empty())
        return "postgresql server binaries not found: apt-get install postgresql (or set "
               "GALAY_PG_BINDIR to the directory with initdb and postgres)";
    uid_t uid;
    gid_t gid;
    if (!server_identity(uid, gid))
        return "running as root and there is no 'postgres' user to run the server as "
               "(PostgreSQL refuses root): apt-get install postgresql creates it";
    return std::nullopt;
}

std::vector<pid_t> processes_in(const std::string& dir) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
        const pid_t pid = std::atoi(name.c_str());
        if (pid == ::getpid()) continue;
        std::error_code cwd_ec;
        const std::string cwd = fs::read_symlink(e.path() / "cwd", cwd_ec).string();
        bool tied = !cwd_ec && (cwd == dir || cwd.rfind(dir + "/", 0) == 0);
        if (!tied) {
            std::string cmd = read_file((e.path() / "cmdline").string());
            std::replace(cmd.begin(), cmd.end(), '\0', ' ');
            tied = cmd.find(dir) != std::string::npos;
        }
        if (tied) out.push_back(pid);
    }
    return out;
}

PostgresServer::PostgresServer(Options opts)
    : opts_(std::move(opts)) {
    if (auto why = postgres_missing()) throw std::runtime_error(*why);
    bindir_ = postgres_bindir();
    server_identity(uid_, gid_);
    const fs::path base = temp_base();
    sweep_stale(base);
    std::string tmpl = (base / ("galay-pg-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
        throw std::runtime_error(errno_text("mkdtemp in " + base.string()));
    dir_ = tmpl;
    data_ = dir_ + "/data";
    try {
        // The socket is <dir>/.s.PGSQL.<port>: sun_path holds 107 bytes.
        if (dir_.size() + 17 > 107)
            throw std::runtime_error("the server's directory " + dir_ +
                                     " is too long for a Unix socket path (set TMPDIR shorter)");
        if (::chown(dir_.c_str(), uid_, gid_) != 0 || ::chmod(dir_.c_str(), 0700) != 0)
            throw std::runtime_error(errno_text("chown/chmod " + dir_));
        const std::string pwfile = dir_ + "/pwfile";
        std::ofstream(pwfile) << opts_.password << "\n";
        if (::chown(pwfile.c_str(), uid_, gid_) != 0)
            throw std::runtime_error(errno_text("chown " + pwfile));
        const std::string initdb_log = dir_ + "/initdb.log";
        const pid_t init =
            spawn({bindir_ + "/initdb", "-D", data_, "-U", opts_.role, "--pwfile=" + pwfile,
                   "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "--locale=C",
                   "-E", "UTF8", "--no-instructions"},
                  dir_, initdb_log, uid_, gid_, true);
        const std::optional<int> st = reap(init, opts_.ready_timeout);
        if (!st) {
            ::kill(init, SIGKILL);
            (void)reap(init, std::chrono::seconds(30));
            throw std::runtime_error("initdb did not finish within " +
                                     std::to_string(opts_.ready_timeout.count()) +
                                     " s: " + tail(read_file(initdb_log)));
        }
        if (*st != 0)
            throw std::runtime_error("initdb failed (" + describe_status(*st) + ", the server " +
                                     "user must reach " + dir_ +
                                     "): " + tail(read_file(initdb_log)));
        fs::remove(pwfile);
        std::ofstream(data_ + "/postgresql.conf", std::ios::app)
            << "\n# galay test server\nlisten_addresses = '127.0.0.1'\n"
            << "unix_socket_directories = '" << dir_ << "'\n"
            << "max_connections = " << opts_.max_connections << "\n"
            << "shared_buffers = 32MB\nfsync = off\nsynchronous_commit = off\n"
            << "full_page_writes = off\nautovacuum = off\n";
        // A port free a moment ago may be taken by the time the server binds: try another.
        for (int attempt = 0;; ++attempt) {
            const std::size_t log_before = read_file(log_path()).size();
            try {
                start_on(free_loopback_port());
                break;
            } catch (const std::runtime_error&) {
                const std::string fresh = read_file(log_path()).substr(log_before);
                if (attempt < 4 && fresh.find("Address already in use") != std::string::npos)
                    continue;
                throw;
            }
        }
    } catch (...) {
        kill();
        kill_and_wait(processes_in(dir_));
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

PostgresServer::~PostgresServer() {
    try {
        stop();
    } catch (...) {
    }
    kill_and_wait(processes_in(dir_));
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::string PostgresServer::log_path() const {
    return dir_ + "/server.log";
}

std::string PostgresServer::log() const {
    return read_file(log_path());
}

std::string PostgresServer::socket_conninfo() const {
    return "host=" + dir_ + " port=" + std::to_string(port_) +
           " dbname=postgres user=" + opts_.role;
}

std::string PostgresServer::tcp_conninfo(std::optional<std::string> password) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=postgres user=" + opts_.role +
           " password=" + password.value_or(opts_.password);
}

void PostgresServer::start() {
    if (pid_ > 0) return;
    start_on(port_);
}

void PostgresServer::start_on(int port) {
    port_ = port;
    pid_ = spawn({bindir_ + "/postgres", "-D", data_, "-p", std::to_string(port)}, data_,
                 log_path(), uid_, gid_, true);
    wait_ready();
}

void PostgresServer::wait_ready() {
    const auto deadline = Clock::now() + opts_.ready_timeout;
    const std::string sock = socket_conninfo(), tcp = tcp_conninfo();
    while (true) {
        // The postmaster's exit ends the wait at once; otherwise this paces the pings.
        if (auto st = reap(pid_, std::chrono::milliseconds(10))) {
            pid_ = 0;
            throw std::runtime_error("postgres exited (" + describe_status(*st) +
                                     ") before accepting connections on port " +
                                     std::to_string(port_) + ": " + tail(log()));
        }
        if (PQping(sock.c_str()) == PQPING_OK && PQping(tcp.c_str()) == PQPING_OK) return;
        if (Clock::now() > deadline) {
            kill();
            throw std::runtime_error("postgres did not accept connections within " +
                                     std::to_string(opts_.ready_timeout.count()) +
                                     " s: " + tail(log()));
        }
    }
}

void PostgresServer::stop(std::chrono::seconds timeout) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT); // fast shutdown
    if (!reap(pid_, timeout)) {
        kill();
        return;
    }
    pid_ = 0;
}

void PostgresServer::kill() {
    if (pid_ > 0) {
        // Stopped first, so that it forks nothing between the listing and the kill.
        ::kill(pid_, SIGSTOP);
        std::vector<pid_t> all = children_of(pid_);
        all.push_back(pid_);
        kill_and_wait(all);
        (void)reap(pid_, std::chrono::seconds(30));
        pid_ = 0;
    }
    if (!dir_.empty()) kill_and_wait(processes_in(dir_));
}

std::vector<pid_t> PostgresServer::processes() const {
    if (pid_ <= 0) return {};
    std::vector<pid_t> out = children_of(pid_);
    out.insert(out.begin(), pid_);
    return out;
}

} // namespace galay::test
