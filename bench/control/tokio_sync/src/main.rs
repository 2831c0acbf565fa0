//! tokio_sync: the Tokio control group of galay's bench_sync, in the same shapes.
//!
//!   tokio_sync [--rounds 100000] [--warmup-rounds 10000] [--messages 2000000]
//!              [--capacity 1024] [--producers 1,4] [--blocking-rounds 20000]
//!              [--blocking-cpu N] [--cpus 0,1] [--json]
//!
//! - `tokio`: a multi-thread runtime with 2 workers (pinned to the two CPUs); the ping and pong
//!   tasks (and the producers and the consumer) are spawned on it and Tokio places them, as a
//!   Tokio server would run.
//! - `tokio_pinned`: two current-thread runtimes, one per pinned thread, with one side on each:
//!   exactly bench_sync's shape (every hand-off crosses threads).
//! Channels are `tokio::sync::mpsc::channel(capacity)` of u64. Throughput: 1.1 x `--messages`
//! are sent and the consumer times the last `--messages` (the first tenth warms up). Ping-pong round trips are timed
//! one by one into a log-linear histogram built like tools/common/histogram.hpp (same buckets,
//! same percentile rule); throughput counts and sums every value.
//! spawn_blocking round trip (bench_sync's `spawn_blocking` shape): a task awaits
//! `tokio::task::spawn_blocking(move || i + 1)`, one at a time, `--blocking-rounds` timed after a
//! tenth as many warm-up ones; under `tokio` the task runs on the 2-worker runtime, under
//! `tokio_pinned` on a current-thread runtime on a thread pinned to the first CPU. Each
//! blocking-pool thread pins itself to `--blocking-cpu` (default the second CPU; -1 not pinned)
//! when it first runs the closure, as bench_sync does with galay's. Exit 1 on a wrong message, 2
//! on a usage error.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

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
}

fn usage(msg: &str) -> ! {
    eprintln!("tokio_sync: {msg}");
    eprintln!(
        "usage: tokio_sync [--rounds N] [--warmup-rounds N] [--messages N] [--capacity N] \
         [--producers 1,4] [--blocking-rounds N] [--blocking-cpu N] [--cpus 0,1] [--json]"
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
            _ => usage(&format!("unknown argument '{a}'")),
        }
    }
    if o.capacity == 0
        || o.rounds == 0
        || o.messages == 0
        || o.blocking_rounds == 0
        || o.producers.iter().any(|&p| p == 0)
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
    let multi_pp = pingpong_multi(&o);
    let pinned_pp = pingpong_pinned(&o);
    let mut multi_tp = Vec::new();
    let mut pinned_tp = Vec::new();
    for &p in &o.producers {
        multi_tp.push((p, o.messages, throughput_multi(&o, p)));
        pinned_tp.push((p, o.messages, throughput_pinned(&o, p)));
    }
    let multi_sb = blocking_multi(&o);
    let pinned_sb = blocking_pinned(&o);
    let errors = ERRORS.load(Ordering::Relaxed);
    if o.json {
        println!(
            "{{\"tokio\": {{\"pingpong\": {}, \"throughput\": {}, \"spawn_blocking\": {}}}, \"tokio_pinned\": {{\"pingpong\": {}, \"throughput\": {}, \"spawn_blocking\": {}}}, \"errors\": {}}}",
            multi_pp.json(),
            throughput_json(&multi_tp),
            blocking_json(&multi_sb),
            pinned_pp.json(),
            throughput_json(&pinned_tp),
            blocking_json(&pinned_sb),
            errors
        );
    } else {
        for (name, h, tp, sb) in [
            ("tokio", &multi_pp, &multi_tp, &multi_sb),
            ("tokio_pinned", &pinned_pp, &pinned_tp, &pinned_sb),
        ] {
            println!(
                "{name:<13} ping-pong p50 {} ns, p99 {} ns, p99.9 {} ns",
                h.percentile(0.5),
                h.percentile(0.99),
                h.percentile(0.999)
            );
            for (p, _, rate) in tp.iter() {
                println!("{name:<13} {p} producer(s): {rate:.0} messages/s");
            }
            println!(
                "{name:<13} spawn_blocking p50 {} ns, p99 {} ns, {:.0} round trips/s",
                sb.0.percentile(0.5),
                sb.0.percentile(0.99),
                sb.1
            );
        }
    }
    if errors != 0 {
        eprintln!("tokio_sync: {errors} wrong message(s): exit code 1");
        std::process::exit(1);
    }
}
