#include "perf_counters.hpp"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace aiob {

std::string_view counter_name(unsigned c) {
    static constexpr std::string_view names[kNumCounters] = {
        "instructions", "cycles", "branches", "branch-misses", "task-clock", "context-switches"};
    return c < kNumCounters ? names[c] : "?";
}

void CounterValues::merge(const CounterValues& o) {
    for (unsigned i = 0; i < kNumCounters; ++i) {
        if (value[i] && o.value[i])
            *value[i] += *o.value[i];
        else {
            if (value[i] && !o.value[i]) error[i] = o.error[i];
            value[i].reset();
        }
        if (error[i].empty()) error[i] = o.error[i];
    }
    kernel_counted = kernel_counted && o.kernel_counted;
}

namespace {

long perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
    return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

void describe(unsigned c, __u32& type, __u64& config) {
    switch (c) {
    case kInstructions:
        type = PERF_TYPE_HARDWARE, config = PERF_COUNT_HW_INSTRUCTIONS;
        break;
    case kCycles:
        type = PERF_TYPE_HARDWARE, config = PERF_COUNT_HW_CPU_CYCLES;
        break;
    case kBranches:
        type = PERF_TYPE_HARDWARE, config = PERF_COUNT_HW_BRANCH_INSTRUCTIONS;
        break;
    case kBranchMisses:
        type = PERF_TYPE_HARDWARE, config = PERF_COUNT_HW_BRANCH_MISSES;
        break;
    case kTaskClock:
        type = PERF_TYPE_SOFTWARE, config = PERF_COUNT_SW_TASK_CLOCK;
        break;
    default:
        type = PERF_TYPE_SOFTWARE, config = PERF_COUNT_SW_CONTEXT_SWITCHES;
        break;
    }
}

} // namespace

ThreadCounters::~ThreadCounters() {
    for (int fd : fd_)
        if (fd >= 0) ::close(fd);
}

void ThreadCounters::open() {
    for (unsigned c = 0; c < kNumCounters; ++c) {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        describe(c, attr.type, attr.config);
        attr.disabled = 1;
        attr.exclude_hv = 1;
        attr.exclude_kernel = kernel_ ? 0 : 1;
        attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        long fd = perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0 && (errno == EACCES || errno == EPERM) && kernel_) {
            // perf_event_paranoid forbids kernel-mode counting: count user mode for all counters.
            kernel_ = false;
            for (unsigned k = 0; k < c; ++k)
                if (fd_[k] >= 0) ::close(fd_[k]), fd_[k] = -1;
            c = static_cast<unsigned>(-1);
            continue;
        }
        if (fd < 0)
            error_[c] = std::string("perf_event_open: ") + std::strerror(errno);
        else
            fd_[c] = static_cast<int>(fd);
    }
}

void ThreadCounters::enable() {
    for (int fd : fd_)
        if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

void ThreadCounters::disable() {
    for (int fd : fd_)
        if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
}

CounterValues ThreadCounters::read() const {
    CounterValues v;
    v.kernel_counted = kernel_;
    for (unsigned c = 0; c < kNumCounters; ++c) {
        if (fd_[c] < 0) {
            v.error[c] = error_[c].empty() ? "not opened" : error_[c];
            continue;
        }
        uint64_t buf[3] = {0, 0, 0}; // value, time_enabled, time_running
        if (::read(fd_[c], buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) {
            v.error[c] = std::string("read: ") + std::strerror(errno);
            continue;
        }
        if (buf[2] == 0 && buf[1] != 0) {
            v.error[c] = "never scheduled on the PMU (multiplexing)";
            continue;
        }
        double scale = (buf[2] && buf[1] != buf[2]) ? double(buf[1]) / double(buf[2]) : 1.0;
        v.value[c] = static_cast<uint64_t>(double(buf[0]) * scale);
    }
    return v;
}

} // namespace aiob
