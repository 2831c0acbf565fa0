//! tokio_sync: the Tokio control group of galay's bench_sync, in the same shapes.
//!
//!   tokio_sync [--rounds 100000] [--warmup-rounds 10000] [--messages 2000000]
//!              [--capacity 1024] [--producers 1,4] [--blocking-rounds 20000]
//!              [--blocking-cpu N] [--cpus 0,1] [--json] [--broadcast-receivers 1,4,16]
//!              [--broadcast-messages 1000000] [--cases pingpong,throughput,blocking,broadcast]
//!
//! - `tokio`: a multi-thread runtime with 2 workers (pinned to the two CPUs); the ping and pong
//!   tasks (and the producers and the consumer) are spawned on it and Tokio places them, as a
//!   Tokio server would run.
//! - `tokio_pinned`: two current-thread runtimes, one per pinned thread, with one side on each:
//!   exactly bench_sync's shape (every hand-off crosses threads).
//! Channels are `tokio::sync::mpsc::channel(capacity)` of u64. Throughput: 1.1 x `--messages`
//! are sent and the consumer times the last `--messages` (the first tenth warms up). Ping-pong round trips are timed
//! one by one into a log-linear histogram built like bench/measure/histogram.hpp (same
//! buckets, same percentile rule); throughput counts and sums every value.
//! spawn_blocking round trip (bench_sync's `spawn_blocking` shape): a task awaits
//! `tokio::task::spawn_blocking(move || i + 1)`, one at a time, `--blocking-rounds` timed after a
//! tenth as many warm-up ones; under `tokio` the task runs on the 2-worker runtime, under
//! `tokio_pinned` on a current-thread runtime on a thread pinned to the first CPU. Each
//! blocking-pool thread pins itself to `--blocking-cpu` (default the second CPU; -1 not pinned)
//! when it first runs the closure, as bench_sync does with galay's.
//! Broadcast (bench_sync's `broadcast` shape): one sender sends 1.1 x `--broadcast-messages`
//! values on `tokio::sync::broadcast::channel(capacity)` to 1, 4 and 16 receivers, each checking
//! it gets every value in order; timed from the first timed send to the last receiver's last
//! value. The sender stays within the ring as bench_sync's does (before each half-ring window it
//! yields until every receiver has finished the window before the previous one), so nobody lags;
//! `lost` counts `Lagged` anyway. Under `tokio` all tasks are spawned on the 2-worker runtime,
//! under `tokio_pinned` the sender runs on one pinned current-thread runtime and the receivers on
//! the other. Exit 1 on a wrong message, 2 on a usage error.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{broadcast, mpsc};

struct Opts {
    rounds: u64,
    warmup: u64,
    messages: u64,
    capacity: usize,
    producers: Vec<u64>,
    blocking_rounds: u64,
    blocking_cpu: i64,
    cpus: [usize; 2],
    json: bool,
    broadcast_receivers: Vec<u64>,
    broadcast_messages: u64,
    cases: Vec<String>,
}

impl Opts {
    fn has(&self, case: &str) -> bool {
        self.cases.iter().any(|c| c == case)
    }
}

fn usage(msg: &str) -> ! {
    eprintln!("tokio_sync: {msg}");
    eprintln!(
        "usage: tokio_sync [--rounds N] [--warmup-rounds N] [--messages N] [--capacity N] \
         [--producers 1,4] [--blocking-rounds N] [--blocking-cpu N] [--cpus 0,1] [--json] \
         [--broadcast-receivers 1,4,16] [--broadcast-messages N] [--cases LIST]"
    );
    std::process::exit(2);
}

fn parse() -> Opts {
    let mut o = Opts {
        rounds: 100_000,
        warmup: 10_000,
        messages: 2_000_000,
        capacity: 1024,
        producers: vec![1, 4],
        blocking_rounds: 20_000,
        blocking_cpu: -2,
        cpus: [0, 1],
        json: false,
        broadcast_receivers: vec![1, 4, 16],
        broadcast_messages: 1_000_000,
        cases: ["pingpong", "throughput", "blocking", "broadcast"].iter().map(|s| s.to_string()).collect(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{a} needs a value")));
        let num = |s: String| -> u64 { s.parse().unwrap_or_else(|_| usage(&format!("bad number '{s}'"))) };
        match a.as_str() {
            "--rounds" => o.rounds = num(value()),
            "--warmup-rounds" => o.warmup = num(value()),
            "--messages" => o.messages = num(value()),
            "--capacity" => o.capacity = num(value()) as usize,
            "--producers" => o.producers = value().split(',').map(|s| num(s.to_string())).collect(),
            "--blocking-rounds" => o.blocking_rounds = num(value()),
            "--blocking-cpu" => {
                let s = value();
                o.blocking_cpu = s.parse().unwrap_or_else(|_| usage(&format!("bad CPU '{s}'")));
                if o.blocking_cpu < -1 {
                    usage("--blocking-cpu: a CPU number, or -1 for not pinned");
                }
            }
            "--cpus" => {
                let v: Vec<u64> = value().split(',').map(|s| num(s.to_string())).collect();
                if v.len() != 2 {
                    usage("--cpus needs two CPUs, e.g. 0,1");
                }
                o.cpus = [v[0] as usize, v[1] as usize];
            }
            "--json" => o.json = true,
            "--broadcast-receivers" => {
                o.broadcast_receivers = value().split(',').map(|s| num(s.to_string())).collect()
            }
            "--broadcast-messages" => o.broadcast_messages = num(value()),
            "--cases" => {
                o.cases = value().split(',').map(|s| s.to_string()).collect();
                for c in &o.cases {
                    if !["pingpong", "throughput", "blocking", "broadcast"].contains(&c.as_str()) {
                        usage(&format!("--cases: unknown case '{c}'"));
                    }
                }
            }
            _ => usage(&format!("unknown argument '{a}'")),
        }
    }
    if o.capacity == 0
        || o.rounds == 0
        || o.messages == 0
        || o.blocking_rounds == 0
        || o.broadcast_messages == 0
        || o.producers.iter().any(|&p| p == 0)
        || o.broadcast_receivers.iter().any(|&r| r == 0)
    {
        usage("counts must be >= 1");
    }
    if o.blocking_cpu == -2 {
        o.blocking_cpu = o.cpus[1] as i64;
    }
    o
}

fn pin(cpu: usize) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("tokio_sync: cannot pin to CPU {cpu}");
            std::process::exit(2);
        }
    }
}

/// Log-linear histogram: 128 sub-buckets per power of two (the buckets of histogram.hpp).
struct Hist {
    counts: Vec<u64>,
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
}

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

impl Hist {
    fn new() -> Self {
        Hist { counts: vec![0; 64 * SUB as usize], count: 0, sum: 0, min: u64::MAX, max: 0 }
    }
    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros();
        let shift = msb - SUB_BITS;
        let sub = (v >> shift) - SUB;
        ((shift as u64 + 1) * SUB + sub) as usize
    }
    fn upper_edge(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let shift = i / SUB - 1;
        let sub = i % SUB;
        ((SUB + sub + 1) << shift) - 1
    }
    fn record(&mut self, ns: u64) {
        self.counts[Self::index(ns)] += 1;
        self.count += 1;
        self.sum += ns;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }
    fn percentile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let mut rank = (q * self.count as f64) as u64;
        if rank >= self.count {
            rank = self.count - 1;
        }
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Self::upper_edge(i).min(self.max);
            }
        }
        self.max
    }
    fn json(&self) -> String {
        let mean = if self.count > 0 { self.sum as f64 / self.count as f64 } else { 0.0 };
        format!(
            "{{\"round_trips\": {}, \"p50_ns\": {}, \"p99_ns\": {}, \"p999_ns\": {}, \"mean_ns\": {:.1}, \"min_ns\": {}, \"max_ns\": {}}}",
            self.count,
            self.percentile(0.50),
            self.percentile(0.99),
            self.percentile(0.999),
            mean,
            if self.count > 0 { self.min } else { 0 },
            self.max
        )
    }
}

static ERRORS: AtomicU64 = AtomicU64::new(0);

fn multi_thread_runtime(cpus: [usize; 2]) -> tokio::runtime::Runtime {
    let next = Arc::new(AtomicUsize::new(0));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // The first two threads are the workers; later ones are blocking-pool threads (not pinned).
        .on_thread_start(move || {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i < 2 {
                pin(cpus[i]);
            }
        })
        .build()
        .expect("tokio runtime")
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime")
}

async fn ping(o: (u64, u64), tx: mpsc::Sender<u64>, mut rx: mpsc::Receiver<u64>) -> Hist {
    let (warmup, rounds) = o;
    let mut h = Hist::new();
    for i in 0..warmup + rounds {
        let t0 = Instant::now();
        if tx.send(i).await.is_err() {
            ERRORS.fetch_add(1, Ordering::Relaxed);
            break;
        }
        let v = rx.recv().await;
        let ns = t0.elapsed().as_nanos() as u64;
        if v != Some(i) {
            ERRORS.fetch_add(1, Ordering::Relaxed);
            break;
        }
        if i >= warmup {
            h.record(ns);
        }
    }
    h
}

async fn pong(mut rx: mpsc::Receiver<u64>, tx: mpsc::Sender<u64>) {
    while let Some(v) = rx.recv().await {
        if tx.send(v).await.is_err() {
            break;
        }
    }
}

fn pingpong_multi(o: &Opts) -> Hist {
    let rt = multi_thread_runtime(o.cpus);
    let (tx_there, rx_there) = mpsc::channel(o.capacity);
    let (tx_back, rx_back) = mpsc::channel(o.capacity);
    let w = (o.warmup, o.rounds);
    rt.block_on(async move {
        let b = tokio::spawn(pong(rx_there, tx_back));
        let a = tokio::spawn(ping(w, tx_there, rx_back));
        let h = a.await.expect("ping task");
        b.await.expect("pong task");
        h
    })
}

fn pingpong_pinned(o: &Opts) -> Hist {
    let (tx_there, rx_there) = mpsc::channel(o.capacity);
    let (tx_back, rx_back) = mpsc::channel(o.capacity);
    let (cpu_a, cpu_b) = (o.cpus[0], o.cpus[1]);
    let w = (o.warmup, o.rounds);
    let b = std::thread::spawn(move || {
        pin(cpu_b);
        current_thread_runtime().block_on(pong(rx_there, tx_back));
    });
    let a = std::thread::spawn(move || {
        pin(cpu_a);
        current_thread_runtime().block_on(ping(w, tx_there, rx_back))
    });
    let h = a.join().expect("ping thread");
    b.join().expect("pong thread");
    h
}

async fn produce(tx: mpsc::Sender<u64>, first: u64, count: u64) {
    for v in first..first + count {
        if tx.send(v).await.is_err() {
            ERRORS.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

/// Receives `n` values; returns when it received the one at `mark` and when it finished.
async fn consume(mut rx: mpsc::Receiver<u64>, n: u64, mark: u64) -> (Instant, Instant) {
    let mut sum = 0u64;
    let mut count = 0u64;
    let mut start = Instant::now();
    while count < n {
        if count == mark {
            start = Instant::now();
        }
        match rx.recv().await {
            Some(v) => {
                sum = sum.wrapping_add(v);
                count += 1;
            }
            None => break,
        }
    }
    if count != n || sum != n * (n - 1) / 2 {
        ERRORS.fetch_add(1, Ordering::Relaxed);
    }
    (start, Instant::now())
}

/// Values per producer, total, and the consumer's timing mark: 1.1 x `messages` are sent and
/// the last `messages` are timed (the first tenth warms up), as bench_sync does.
fn shape(o: &Opts, producers: u64) -> (u64, u64, u64) {
    let per = (o.messages + o.messages / 10) / producers;
    let n = per * producers;
    (per, n, n - o.messages.min(n))
}

/// Messages per second: `producers` tasks send to one consumer on a 2-worker runtime.
fn throughput_multi(o: &Opts, producers: u64) -> f64 {
    let rt = multi_thread_runtime(o.cpus);
    let (per, n, mark) = shape(o, producers);
    let (tx, rx) = mpsc::channel(o.capacity);
    let (start, end) = rt.block_on(async move {
        let consumer = tokio::spawn(consume(rx, n, mark));
        for p in 0..producers {
            tokio::spawn(produce(tx.clone(), p * per, per));
        }
        drop(tx);
        consumer.await.expect("consumer task")
    });
    (n - mark) as f64 / (end - start).as_secs_f64()
}

/// The same with the producers on one pinned current-thread runtime and the consumer on another.
fn throughput_pinned(o: &Opts, producers: u64) -> f64 {
    let (per, n, mark) = shape(o, producers);
    let (tx, rx) = mpsc::channel(o.capacity);
    let (cpu_a, cpu_b) = (o.cpus[0], o.cpus[1]);
    let ready = Arc::new(AtomicUsize::new(0));
    let ready_c = ready.clone();
    let consumer = std::thread::spawn(move || {
        pin(cpu_b);
        let rt = current_thread_runtime();
        ready_c.store(1, Ordering::Release);
        rt.block_on(consume(rx, n, mark))
    });
    while ready.load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    let producer = std::thread::spawn(move || {
        pin(cpu_a);
        let rt = current_thread_runtime();
        rt.block_on(async move {
            let hs: Vec<_> =
                (0..producers).map(|p| tokio::spawn(produce(tx.clone(), p * per, per))).collect();
            drop(tx);
            for h in hs {
                h.await.expect("producer task");
            }
        })
    });
    producer.join().expect("producer thread");
    let (start, end) = consumer.join().expect("consumer thread");
    (n - mark) as f64 / (end - start).as_secs_f64()
}

/// What a broadcast run's sender and receivers share: flow control and the tally of losses.
struct BcastShared {
    progress: Vec<Padded>, // per receiver: values received, updated at each window's end
    failed: AtomicBool,
    lost: AtomicU64,
}

/// A counter on a cache line of its own.
#[repr(align(64))]
struct Padded(AtomicU64);

impl BcastShared {
    fn slowest(&self) -> u64 {
        self.progress.iter().map(|p| p.0.load(Ordering::Acquire)).min().unwrap_or(u64::MAX)
    }
}

/// Receives 0..n in order; returns when it received the last one.
async fn bcast_receive(
    mut rx: broadcast::Receiver<u64>,
    (id, n, window): (usize, u64, u64),
    sh: Arc<BcastShared>,
) -> Instant {
    let mut next = 0u64;
    while next < n {
        match rx.recv().await {
            Ok(v) if v == next => {
                next += 1;
                if next % window == 0 {
                    sh.progress[id].0.store(next, Ordering::Release);
                }
            }
            Err(broadcast::error::RecvError::Lagged(k)) => {
                sh.lost.fetch_add(k, Ordering::Relaxed);
                next += k;
            }
            _ => {
                ERRORS.fetch_add(1, Ordering::Relaxed);
                sh.failed.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    Instant::now()
}

/// Sends 0..n, never more than the ring ahead of the slowest receiver (bench_sync's flow
/// control: before a window, wait for every receiver to finish the window before the previous
/// one); returns when it sent the first timed message.
async fn bcast_send(
    tx: broadcast::Sender<u64>,
    (n, mark, window): (u64, u64, u64),
    sh: Arc<BcastShared>,
) -> Instant {
    let mut start = Instant::now();
    for i in 0..n {
        if i == mark {
            start = Instant::now();
        }
        if i % window == 0 && i >= 2 * window {
            let need = (i / window - 1) * window;
            while sh.slowest() < need {
                if sh.failed.load(Ordering::Relaxed) {
                    return start;
                }
                tokio::task::yield_now().await;
            }
        }
        if tx.send(i).is_err() {
            ERRORS.fetch_add(1, Ordering::Relaxed);
            break;
        }
    }
    start
}

/// (n, mark, window): 1.1 x `--broadcast-messages` sent, the last `--broadcast-messages` timed,
/// the ring of `--capacity` slots in two windows.
fn bcast_shape(o: &Opts) -> (u64, u64, u64) {
    let mark = o.broadcast_messages / 10;
    (mark + o.broadcast_messages, mark, (o.capacity as u64 / 2).max(1))
}

fn bcast_shared(receivers: u64) -> Arc<BcastShared> {
    Arc::new(BcastShared {
        progress: (0..receivers).map(|_| Padded(AtomicU64::new(0))).collect(),
        failed: AtomicBool::new(false),
        lost: AtomicU64::new(0),
    })
}

/// Messages/s and losses: one sender and `receivers` receivers spawned on a 2-worker runtime.
fn broadcast_multi(o: &Opts, receivers: u64) -> (f64, u64) {
    let rt = multi_thread_runtime(o.cpus);
    let (n, mark, window) = bcast_shape(o);
    let (tx, _) = broadcast::channel(2 * window as usize);
    let rxs: Vec<_> = (0..receivers).map(|_| tx.subscribe()).collect();
    let sh = bcast_shared(receivers);
    let sh2 = sh.clone();
    let (start, end) = rt.block_on(async move {
        let hs: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(id, rx)| tokio::spawn(bcast_receive(rx, (id, n, window), sh2.clone())))
            .collect();
        let start = tokio::spawn(bcast_send(tx, (n, mark, window), sh2.clone()))
            .await
            .expect("sender task");
        let mut end = start;
        for h in hs {
            end = end.max(h.await.expect("receiver task"));
        }
        (start, end)
    });
    ((n - mark) as f64 / (end - start).as_secs_f64(), sh.lost.load(Ordering::Relaxed))
}

/// The same with the sender on one pinned current-thread runtime and the receivers on another.
fn broadcast_pinned(o: &Opts, receivers: u64) -> (f64, u64) {
    let (n, mark, window) = bcast_shape(o);
    let (tx, _) = broadcast::channel(2 * window as usize);
    let rxs: Vec<_> = (0..receivers).map(|_| tx.subscribe()).collect();
    let sh = bcast_shared(receivers);
    let (cpu_a, cpu_b) = (o.cpus[0], o.cpus[1]);
    let shb = sh.clone();
    let b = std::thread::spawn(move || {
        pin(cpu_b);
        current_thread_runtime().block_on(async move {
            let hs: Vec<_> = rxs
                .into_iter()
                .enumerate()
                .map(|(id, rx)| tokio::spawn(bcast_receive(rx, (id, n, window), shb.clone())))
                .collect();
            let mut ends = Vec::new();
            for h in hs {
                ends.push(h.await.expect("receiver task"));
            }
            ends
        })
    });
    let sha = sh.clone();
    let a = std::thread::spawn(move || {
        pin(cpu_a);
        current_thread_runtime().block_on(bcast_send(tx, (n, mark, window), sha))
    });
    let start = a.join().expect("sender thread");
    let end = b.join().expect("receivers thread").into_iter().fold(start, |e, x| e.max(x));
    ((n - mark) as f64 / (end - start).as_secs_f64(), sh.lost.load(Ordering::Relaxed))
}

fn broadcast_json(o: &Opts, rows: &[(u64, (f64, u64))]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|(r, (rate, lost))| {
            format!(
                "{{\"receivers\": {r}, \"messages\": {}, \"messages_per_second\": {rate:.1}, \"lost\": {lost}}}",
                o.broadcast_messages
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

thread_local! {
    static PINNED: std::cell::Cell<i64> = const { std::cell::Cell::new(-1) };
}

/// Pins the calling thread to `cpu` (unless -1) the first time it is asked to on this thread.
fn pin_once(cpu: i64) {
    if cpu < 0 || PINNED.with(|p| p.get()) == cpu {
        return;
    }
    pin(cpu as usize);
    PINNED.with(|p| p.set(cpu));
}

/// Awaits spawn_blocking(trivial fn) one at a time; the histogram and round trips/s.
async fn blocking_round_trips(warmup: u64, rounds: u64, cpu: i64) -> (Hist, f64) {
    let mut h = Hist::new();
    let mut start = Instant::now();
    for i in 0..warmup + rounds {
        if i == warmup {
            start = Instant::now();
        }
        let t0 = Instant::now();
        let v = tokio::task::spawn_blocking(move || {
            pin_once(cpu);
            i + 1
        })
        .await;
        let ns = t0.elapsed().as_nanos() as u64;
        if v.ok() != Some(i + 1) {
            ERRORS.fetch_add(1, Ordering::Relaxed);
            break;
        }
        if i >= warmup {
            h.record(ns);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { h.count as f64 / secs } else { 0.0 };
    (h, rate)
}

fn blocking_multi(o: &Opts) -> (Hist, f64) {
    let rt = multi_thread_runtime(o.cpus);
    let (w, n, c) = (o.blocking_rounds / 10, o.blocking_rounds, o.blocking_cpu);
    rt.block_on(async move { tokio::spawn(blocking_round_trips(w, n, c)).await.expect("task") })
}

fn blocking_pinned(o: &Opts) -> (Hist, f64) {
    let cpu = o.cpus[0];
    let (w, n, c) = (o.blocking_rounds / 10, o.blocking_rounds, o.blocking_cpu);
    std::thread::spawn(move || {
        pin(cpu);
        current_thread_runtime().block_on(blocking_round_trips(w, n, c))
    })
    .join()
    .expect("spawn_blocking thread")
}

fn blocking_json(b: &(Hist, f64)) -> String {
    let h = b.0.json();
    format!("{}, \"round_trips_per_second\": {:.1}}}", &h[..h.len() - 1], b.1)
}

fn throughput_json(rows: &[(u64, u64, f64)]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|(p, n, rate)| {
            format!("{{\"producers\": {p}, \"messages\": {n}, \"messages_per_second\": {rate:.1}}}")
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn main() {
    let o = parse();
    // Each runtime's figures as JSON fields, in the order of the cases.
    let mut fields: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let mut text: Vec<String> = Vec::new();
    if o.has("pingpong") {
        for (k, (name, h)) in [("tokio", pingpong_multi(&o)), ("tokio_pinned", pingpong_pinned(&o))]
            .into_iter()
            .enumerate()
        {
            fields[k].push(format!("\"pingpong\": {}", h.json()));
            text.push(format!(
                "{name:<13} ping-pong p50 {} ns, p99 {} ns, p99.9 {} ns",
                h.percentile(0.5),
                h.percentile(0.99),
                h.percentile(0.999)
            ));
        }
    }
    if o.has("throughput") {
        let mut multi_tp = Vec::new();
        let mut pinned_tp = Vec::new();
        for &p in &o.producers {
            multi_tp.push((p, o.messages, throughput_multi(&o, p)));
            pinned_tp.push((p, o.messages, throughput_pinned(&o, p)));
        }
        for (k, (name, tp)) in [("tokio", &multi_tp), ("tokio_pinned", &pinned_tp)].into_iter().enumerate() {
            fields[k].push(format!("\"throughput\": {}", throughput_json(tp)));
            for (p, _, rate) in tp.iter() {
                text.push(format!("{name:<13} {p} producer(s): {rate:.0} messages/s"));
            }
        }
    }
    if o.has("blocking") {
        for (k, (name, sb)) in [("tokio", blocking_multi(&o)), ("tokio_pinned", blocking_pinned(&o))]
            .into_iter()
            .enumerate()
        {
            fields[k].push(format!("\"spawn_blocking\": {}", blocking_json(&sb)));
            text.push(format!(
                "{name:<13} spawn_blocking p50 {} ns, p99 {} ns, {:.0} round trips/s",
                sb.0.percentile(0.5),
                sb.0.percentile(0.99),
                sb.1
            ));
        }
    }
    if o.has("broadcast") {
        let mut multi_bc = Vec::new();
        let mut pinned_bc = Vec::new();
        for &r in &o.broadcast_receivers {
            multi_bc.push((r, broadcast_multi(&o, r)));
            pinned_bc.push((r, broadcast_pinned(&o, r)));
        }
        for (k, (name, bc)) in [("tokio", &multi_bc), ("tokio_pinned", &pinned_bc)].into_iter().enumerate() {
            fields[k].push(format!("\"broadcast\": {}", broadcast_json(&o, bc)));
            for (r, (rate, lost)) in bc.iter() {
                text.push(format!("{name:<13} broadcast to {r}: {rate:.0} messages/s, {lost} lost"));
            }
        }
    }
    let errors = ERRORS.load(Ordering::Relaxed);
    if o.json {
        println!(
            "{{\"tokio\": {{{}}}, \"tokio_pinned\": {{{}}}, \"errors\": {}}}",
            fields[0].join(", "),
            fields[1].join(", "),
            errors
        );
    } else {
        for line in &text {
            println!("{line}");
        }
    }
    if errors != 0 {
        eprintln!("tokio_sync: {errors} wrong message(s): exit code 1");
        std::process::exit(1);
    }
}
