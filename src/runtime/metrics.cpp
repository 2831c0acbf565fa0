// galay/metrics.hpp: snapshots of the schedulers' counters and the Prometheus text format.
#include "galay/metrics.hpp"

#include "galay/blocking.hpp"
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <cinttypes>
#include <cstdio>

namespace galay::metrics {

const char* op_kind_name(OpKind kind) noexcept {
    using OpCode = OpKind;
    switch (kind) {
    case OpCode::accept:
        return "accept";
    case OpCode::connect:
        return "connect";
    case OpCode::recv:
        return "recv";
    case OpCode::recv_pooled:
        return "recv_pooled";
    case OpCode::send:
        return "send";
    case OpCode::recvmsg:
        return "recvmsg";
    case OpCode::sendmsg:
        return "sendmsg";
    case OpCode::close:
        return "close";
    case OpCode::read_at:
        return "read_at";
    case OpCode::write_at:
        return "write_at";
    case OpCode::readv_at:
        return "readv_at";
    case OpCode::writev_at:
        return "writev_at";
    case OpCode::fsync:
        return "fsync";
    case OpCode::fdatasync:
        return "fdatasync";
    case OpCode::fallocate:
        return "fallocate";
    case OpCode::recvmmsg:
        return "recvmmsg";
    case OpCode::sendmmsg:
        return "sendmmsg";
    case OpCode::read:
        return "read";
    case OpCode::write:
        return "write";
    case OpCode::waitid:
        return "waitid";
    case OpCode::openat:
        return "openat";
    case OpCode::statx:
        return "statx";
    case OpCode::renameat:
        return "renameat";
    case OpCode::unlinkat:
        return "unlinkat";
    case OpCode::mkdirat:
        return "mkdirat";
    case OpCode::linkat:
        return "linkat";
    case OpCode::symlinkat:
        return "symlinkat";
    case OpCode::splice_in:
        return "splice_in";
    case OpCode::splice_out:
        return "splice_out";
    case OpCode::sendfile:
        return "sendfile";
    case OpCode::send_zc:
        return "send_zc";
    case OpCode::poll:
        return "poll";
    }
    return "unknown";
}

WorkerMetrics& WorkerMetrics::operator+=(const WorkerMetrics& o) noexcept {
    tasks_spawned += o.tasks_spawned;
    tasks_finished += o.tasks_finished;
    tasks_alive += o.tasks_alive;
    loop_turns += o.loop_turns;
    busy_ns += o.busy_ns;
    parked_ns += o.parked_ns;
    ready_depth += o.ready_depth;
    timers_armed += o.timers_armed;
    remote_wakeups += o.remote_wakeups;
    remote_items += o.remote_items;
    pooled_buffers_in_use += o.pooled_buffers_in_use;
    enobufs += o.enobufs;
    stalls += o.stalls;
    idle_spins_found_work += o.idle_spins_found_work;
    idle_spins_slept += o.idle_spins_slept;
    idle_spin_ns += o.idle_spin_ns;
    connections_refused += o.connections_refused;
    for (std::size_t k = 0; k < ops.size(); ++k) {
        ops[k].started += o.ops[k].started;
        ops[k].completed += o.ops[k].completed;
        ops[k].failed += o.ops[k].failed;
        ops[k].bytes += o.ops[k].bytes;
    }
    for (std::size_t b = 0; b < completions_per_turn.size(); ++b)
        completions_per_turn[b] += o.completions_per_turn[b];
    completions_sum += o.completions_sum;
    for (std::size_t b = 0; b < turn_lengths.size(); ++b)
        turn_lengths[b] += o.turn_lengths[b];
    turn_length_sum_ns += o.turn_length_sum_ns;
    longest_turn_ns = std::max(longest_turn_ns, o.longest_turn_ns);
    return *this;
}

WorkerMetrics RuntimeMetrics::total() const {
    WorkerMetrics t;
    if (!workers.empty()) t.backend = workers.front().backend;
    for (const WorkerMetrics& w : workers)
        t += w;
    return t;
}

WorkerMetrics snapshot(const Scheduler& s) {
    const detail::WorkerCounters& c = detail::SchedulerAccess::counters(s);
    WorkerMetrics m;
    m.backend = s.backend_name();
    // Completions before starts: an op that completes between the two reads then cannot make
    // in_flight() negative.
    for (std::size_t k = 0; k < detail::kOpKinds; ++k) {
        m.ops[k].completed = c.ops_completed[k].get();
        m.ops[k].failed = c.ops_failed[k].get();
        m.ops[k].bytes = c.bytes[k].get();
    }
    for (std::size_t k = 0; k < detail::kOpKinds; ++k)
        m.ops[k].started = std::max(c.ops_started[k].get(), m.ops[k].completed);
    m.tasks_finished = c.tasks_finished.get();
    m.tasks_spawned = c.tasks_spawned.get();
    m.tasks_alive = s.detached_count();
    m.loop_turns = c.loop_turns.get();
    m.busy_ns = c.busy_ns.get();
    m.parked_ns = c.parked_ns.get();
    m.ready_depth = c.ready_depth.get();
    m.timers_armed = c.timers_armed.get();
    m.remote_wakeups = c.remote_wakeups.get();
    m.connections_refused = c.conns_refused.get();
    m.remote_items = c.remote_items.get();
    m.pooled_buffers_in_use = c.pool_in_use.get();
    m.enobufs = c.enobufs.get();
    m.stalls = c.stalls.get();
    m.idle_spins_found_work = c.spins_found.get();
    m.idle_spins_slept = c.spins_slept.get();
    m.idle_spin_ns = c.spin_ns.get();
    for (std::size_t b = 0; b < detail::kTurnBuckets; ++b)
        m.completions_per_turn[b] = c.turn_completions[b].get();
    m.completions_sum = c.turn_completions_sum.get();
    for (std::size_t b = 0; b < detail::kTurnLengthBuckets; ++b)
        m.turn_lengths[b] = c.turn_lengths[b].get();
    m.turn_length_sum_ns = c.turn_length_sum_ns.get();
    m.longest_turn_ns = c.longest_turn_ns.take();
    return m;
}

RuntimeMetrics snapshot(const Runtime& rt) {
    RuntimeMetrics m;
    m.workers.reserve(rt.size());
    for (unsigned i = 0; i < rt.size(); ++i) {
        m.workers.push_back(snapshot(rt.scheduler(i)));
        m.workers.back().worker = static_cast<int>(i);
    }
    const detail::BlockingStats b = detail::blocking_stats();
    m.blocking_threads = b.threads;
    m.blocking_started = b.jobs_started;
    m.blocking_queued = b.jobs_queued;
    return m;
}

namespace {

/// Builds the exposition text: one HELP and TYPE per family, then its samples.
class Text {
public:
    void family(const char* name, const char* type, const char* help) {
        out_ += "# HELP galay_";
        out_ += name;
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE galay_";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }
    void sample(const char* name, const std::string& labels, double v) {
        char num[64];
        std::snprintf(num, sizeof num, "%.17g", v);
        line(name, labels, num);
    }
    void sample(const char* name, const std::string& labels, std::uint64_t v) {
        char num[32];
        std::snprintf(num, sizeof num, "%" PRIu64, v);
        line(name, labels, num);
    }
    std::string take() { return std::move(out_); }

private:
    void line(const char* name, const std::string& labels, const char* value) {
        out_ += "galay_";
        out_ += name;
        if (!labels.empty()) {
            out_ += '{';
            out_ += labels;
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }
    std::string out_;
};

std::string worker_label(const WorkerMetrics& w) {
    return "worker=\"" + std::to_string(w.worker) + "\"";
}

using U64 = std::uint64_t WorkerMetrics::*;

void per_worker(Text& t, const RuntimeMetrics& m, const char* name, const char* type,
                const char* help, U64 field) {
    t.family(name, type, help);
    for (const WorkerMetrics& w : m.workers)
        t.sample(name, worker_label(w), w.*field);
}

void per_worker_seconds(Text& t, const RuntimeMetrics& m, const char* name, const char* help,
                        U64 field) {
    t.family(name, "counter", help);
    for (const WorkerMetrics& w : m.workers)
        t.sample(name, worker_label(w), static_cast<double>(w.*field) / 1e9);
}

void per_kind(Text& t, const RuntimeMetrics& m, const char* name, const char* type,
              const char* help, std::uint64_t (*get)(const OpMetrics&)) {
    t.family(name, type, help);
    for (const WorkerMetrics& w : m.workers)
        for (std::size_t k = 0; k < detail::kOpKinds; ++k) {
            const OpMetrics& o = w.ops[k];
            if (o.started == 0) continue; // kinds never used make no series
            t.sample(name,
                     worker_label(w) + ",op=\"" + op_kind_name(static_cast<detail::OpCode>(k)) +
                         "\"",
                     get(o));
        }
}

} // namespace

std::string prometheus_text(const RuntimeMetrics& m) {
    Text t;
    per_worker(t, m, "tasks_spawned_total", "counter", "Tasks started on the worker.",
               &WorkerMetrics::tasks_spawned);
    per_worker(t, m, "tasks_finished_total", "counter",
               "Tasks finished (or destroyed at shutdown) on the worker.",
               &WorkerMetrics::tasks_finished);
    per_worker(t, m, "tasks_alive", "gauge", "Tasks placed on the worker and not finished.",
               &WorkerMetrics::tasks_alive);
    per_worker(t, m, "loop_turns_total", "counter", "Times the worker polled its driver.",
               &WorkerMetrics::loop_turns);
    per_worker_seconds(t, m, "busy_seconds_total",
                       "Time the worker ran outside blocking waits in the kernel.",
                       &WorkerMetrics::busy_ns);
    per_worker_seconds(t, m, "parked_seconds_total",
                       "Time the worker waited in the kernel for completions.",
                       &WorkerMetrics::parked_ns);
    per_worker(t, m, "ready_queue_depth", "gauge",
               "Coroutines ready to run at the start of the last turn.",
               &WorkerMetrics::ready_depth);
    per_worker(t, m, "timers_armed", "gauge", "Timers armed at the start of the last turn.",
               &WorkerMetrics::timers_armed);
    per_worker(t, m, "remote_wakeups_total", "counter",
               "Times the worker picked up work posted by other threads.",
               &WorkerMetrics::remote_wakeups);
    per_worker(t, m, "remote_items_total", "counter",
               "Coroutines and calls posted to the worker by other threads.",
               &WorkerMetrics::remote_items);
    per_worker(t, m, "pooled_buffers_in_use", "gauge",
               "Pooled receive buffers not free at the last turn.",
               &WorkerMetrics::pooled_buffers_in_use);
    per_worker(t, m, "pooled_buffer_exhausted_total", "counter",
               "Pooled receives that found no free buffer (ENOBUFS).", &WorkerMetrics::enobufs);
    per_worker(t, m, "stalls_total", "counter",
               "Loop turns or task resumes longer than the stall threshold.",
               &WorkerMetrics::stalls);
    per_worker(t, m, "idle_spins_found_work_total", "counter",
               "Idle spins (SchedulerOptions::idle_spin) that found work before sleeping.",
               &WorkerMetrics::idle_spins_found_work);
    per_worker(t, m, "idle_spins_slept_total", "counter",
               "Idle spins that found nothing and ended in a sleep.",
               &WorkerMetrics::idle_spins_slept);
    per_worker_seconds(t, m, "idle_spin_seconds_total", "Time the worker spent in idle spins.",
                       &WorkerMetrics::idle_spin_ns);
    per_worker(t, m, "connections_refused_total", "counter",
               "Connections refused over ServeOptions::max_connections.",
               &WorkerMetrics::connections_refused);
    per_kind(t, m, "ops_started_total", "counter", "Operations handed to the driver.",
             [](const OpMetrics& o) { return o.started; });
    per_kind(t, m, "ops_completed_total", "counter", "Operations completed (failures included).",
             [](const OpMetrics& o) { return o.completed; });
    per_kind(t, m, "ops_failed_total", "counter", "Operations completed with an error.",
             [](const OpMetrics& o) { return o.failed; });
    per_kind(t, m, "ops_in_flight", "gauge", "Operations started and not completed.",
             [](const OpMetrics& o) { return o.in_flight(); });
    per_kind(t, m, "op_bytes_total", "counter", "Bytes moved by successful transfers.",
             [](const OpMetrics& o) { return o.bytes; });

    t.family("completions_per_turn", "histogram", "Operations completed per loop turn.");
    for (const WorkerMetrics& w : m.workers) {
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b < detail::kTurnBuckets; ++b) {
            cumulative += w.completions_per_turn[b];
            const std::string le =
                b + 1 < detail::kTurnBuckets ? std::to_string((std::uint64_t{1} << b) - 1) : "+Inf";
            t.sample("completions_per_turn_bucket", worker_label(w) + ",le=\"" + le + "\"",
                     cumulative);
        }
        t.sample("completions_per_turn_sum", worker_label(w), w.completions_sum);
        t.sample("completions_per_turn_count", worker_label(w), cumulative);
    }

    t.family("loop_turn_seconds", "histogram",
             "Loop turns by length: from the end of one poll of the driver to the next wait.");
    for (const WorkerMetrics& w : m.workers) {
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b < detail::kTurnLengthBuckets; ++b) {
            cumulative += w.turn_lengths[b];
            char le[32] = "+Inf";
            if (b + 1 < detail::kTurnLengthBuckets)
                std::snprintf(le, sizeof le, "%g", static_cast<double>(1ULL << b) * 1e-6);
            t.sample("loop_turn_seconds_bucket", worker_label(w) + ",le=\"" + le + "\"",
                     cumulative);
        }
        t.sample("loop_turn_seconds_sum", worker_label(w),
                 static_cast<double>(w.turn_length_sum_ns) / 1e9);
        t.sample("loop_turn_seconds_count", worker_label(w), cumulative);
    }
    t.family("longest_loop_turn_seconds", "gauge",
             "The longest loop turn since the previous snapshot of the worker's metrics.");
    for (const WorkerMetrics& w : m.workers)
        t.sample("longest_loop_turn_seconds", worker_label(w),
                 static_cast<double>(w.longest_turn_ns) / 1e9);

    t.family("blocking_threads", "gauge", "Threads of the blocking pool.");
    t.sample("blocking_threads", "", m.blocking_threads);
    t.family("blocking_queued_jobs", "gauge", "Jobs waiting for a blocking-pool thread.");
    t.sample("blocking_queued_jobs", "", m.blocking_queued);
    t.family("blocking_jobs_started_total", "counter", "Jobs the blocking pool has started.");
    t.sample("blocking_jobs_started_total", "", m.blocking_started);
    return t.take();
}

std::string prometheus_text(const Runtime& rt) {
    return prometheus_text(snapshot(rt));
}

} // namespace galay::metrics
