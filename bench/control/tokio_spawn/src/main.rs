//! tokio_spawn PROGRAM SECS [CONCURRENCY]: spawn PROGRAM and wait for it, CONCURRENCY at a time
//! (default 1), for SECS seconds on a current-thread runtime; prints one JSON object:
//! {"spawns": N, "secs": S, "per_sec": R, "cpu_us_per_spawn": C}, C being this process's own
//! user + system CPU (getrusage RUSAGE_SELF: the children's CPU is not counted) per spawn, as
//! raw_spawn and bench_local report it. Every child must exit 0.
use std::time::{Duration, Instant};

/// Spawn and wait, one child at a time, until `until`; the number of children.
async fn spawn_loop(program: String, until: Instant) -> u64 {
    let mut n = 0u64;
    while Instant::now() < until {
        let status = tokio::process::Command::new(&program).status().await.unwrap_or_else(|e| {
            eprintln!("tokio_spawn: {}: {}", program, e);
            std::process::exit(1)
        });
        if !status.success() {
            eprintln!("tokio_spawn: {} ended with {}", program, status);
            std::process::exit(1);
        }
        n += 1;
    }
    n
}

/// User + system CPU seconds of this process so far (its children excluded).
fn cpu_s() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        eprintln!("tokio_spawn: getrusage: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn usage(why: &str) -> ! {
    eprintln!("tokio_spawn: {}\nusage: tokio_spawn PROGRAM SECS [CONCURRENCY]", why);
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 || args.len() > 4 {
        usage("PROGRAM and SECS are required");
    }
    let program = args[1].clone();
    let secs: f64 = args[2].parse().unwrap_or_else(|_| usage("SECS must be a number"));
    let conc: usize = match args.get(3) {
        Some(c) => c.parse().unwrap_or(0),
        None => 1,
    };
    if conc == 0 {
        usage("CONCURRENCY must be a whole number, at least 1");
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cpu0 = cpu_s();
    let (n, took) = rt.block_on(async move {
        let start = Instant::now();
        let until = start + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..conc).map(|_| tokio::spawn(spawn_loop(program.clone(), until))).collect();
        let mut total = 0u64;
        for t in tasks {
            total += t.await.unwrap();
        }
        (total, start.elapsed().as_secs_f64())
    });
    let cpu = cpu_s() - cpu0;
    println!(
        "{{\"spawns\": {}, \"secs\": {:.6}, \"per_sec\": {:.1}, \"cpu_us_per_spawn\": {:.3}}}",
        n,
        took,
        n as f64 / took,
        cpu / n.max(1) as f64 * 1e6
    );
}
