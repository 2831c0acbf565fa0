//! tokio_latency: the latency study's five benchmarks with Tokio's current-thread runtime at both
//! ends, a control group of bench/studies/latency.py.
//!
//!     tokio_latency server -p 9000
//!     tokio_latency -h 127.0.0.1 -p 9000 [-n 30] [--sample-ms 5] [--warmup-ms 200] [--json]
//!
//! The benchmarks, their calibration and the JSON schema are those of bench_latency and of every
//! control group (bench/control/README.md). Exit 1 on any I/O error or wrong echo, 2 on bad flags.
use std::fmt::Write as _;
use std::process::exit;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct BenchDef {
    name: &'static str,
    bytes: usize,
    round_trips: usize,
    new_connection: bool,
}

const BENCHES: [BenchDef; 5] = [
    BenchDef {
        name: "network_latency_100B",
        bytes: 100,
        round_trips: 1,
        new_connection: true,
    },
    BenchDef {
        name: "network_latency_1000B",
        bytes: 1000,
        round_trips: 1,
        new_connection: true,
    },
    BenchDef {
        name: "connection_strategy/new_connection",
        bytes: 256,
        round_trips: 1,
        new_connection: true,
    },
    BenchDef {
        name: "connection_strategy/reuse",
        bytes: 256,
        round_trips: 1,
        new_connection: false,
    },
    BenchDef {
        name: "throughput_100_messages",
        bytes: 256,
        round_trips: 100,
        new_connection: false,
    },
];

fn fail(msg: String) -> ! {
    eprintln!("tokio_latency: {msg}");
    exit(1)
}

fn usage() -> ! {
    eprintln!("usage: tokio_latency server [-p port]\n       tokio_latency -h host -p port [-n samples] [--sample-ms ms] [--warmup-ms ms] [--json]");
    exit(2)
}

async fn serve(port: u16) {
    let l = TcpListener::bind(("0.0.0.0", port))
        .await
        .unwrap_or_else(|e| fail(format!("cannot listen on port {port}: {e}")));
    println!(
        "listening on 0.0.0.0:{} (tokio_latency)",
        l.local_addr().unwrap().port()
    );
    loop {
        let Ok((mut c, _)) = l.accept().await else {
            continue;
        };
        let _ = c.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match c.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if c.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

struct Client {
    addr: String,
    seq: u64,
}

impl Client {
    async fn dial(&self) -> TcpStream {
        let s = TcpStream::connect(&self.addr)
            .await
            .unwrap_or_else(|e| fail(format!("connect to {}: {e}", self.addr)));
        let _ = s.set_nodelay(true);
        s
    }

    async fn round_trip(&mut self, s: &mut TcpStream, out: &mut [u8], inb: &mut [u8]) {
        self.seq += 1;
        let n = out.len().min(8);
        out[..n].copy_from_slice(&self.seq.to_le_bytes()[..n]);
        if let Err(e) = s.write_all(out).await {
            fail(format!("write: {e}"));
        }
        let mut got = 0;
        while got < inb.len() {
            match s.read(&mut inb[got..]).await {
                Ok(0) => fail(format!(
                    "the server closed the connection after {got} of {} echoed bytes",
                    inb.len()
                )),
                Ok(k) => got += k,
                Err(e) => fail(format!("read: {e}")),
            }
        }
        if inb != out {
            fail("echo mismatch".to_string());
        }
    }

    async fn run(
        &mut self,
        d: &BenchDef,
        iterations: u64,
        persistent: &mut Option<TcpStream>,
        times: Option<&mut Vec<i64>>,
    ) {
        let mut out: Vec<u8> = (0..d.bytes).map(|i| b'a' + (i % 26) as u8).collect();
        let mut inb = vec![0u8; d.bytes];
        let mut times = times;
        for _ in 0..iterations {
            let t0 = Instant::now();
            if d.new_connection {
                let mut s = self.dial().await;
                for _ in 0..d.round_trips {
                    self.round_trip(&mut s, &mut out, &mut inb).await;
                }
                drop(s);
            } else {
                let s = persistent.as_mut().expect("a persistent connection");
                for _ in 0..d.round_trips {
                    self.round_trip(s, &mut out, &mut inb).await;
                }
            }
            if let Some(t) = times.as_deref_mut() {
                t.push(t0.elapsed().as_nanos() as i64);
            }
        }
    }
}

fn json_list<T: std::fmt::Display>(v: &[T]) -> String {
    let mut s = String::from("[");
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{x}");
    }
    s.push(']');
    s
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut host, mut port, mut samples) = ("127.0.0.1".to_string(), -1i64, 30usize);
    let (mut sample_ms, mut warmup_ms, mut json, mut server) = (5.0f64, 200.0f64, false, false);
    let num = |s: &str| -> f64 { s.parse().unwrap_or_else(|_| usage()) };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let has_value = !matches!(arg, "server" | "--json");
        let value = if has_value {
            args.get(i + 1)
                .map(String::as_str)
                .unwrap_or_else(|| usage())
        } else {
            ""
        };
        match arg {
            "server" if i == 0 => server = true,
            "-h" | "--host" => host = value.to_string(),
            "-p" | "--port" => port = num(value) as i64,
            "-n" | "--samples" => samples = num(value) as usize,
            "--sample-ms" => sample_ms = num(value),
            "--warmup-ms" => warmup_ms = num(value),
            "--json" => json = true,
            _ => usage(),
        }
        i += if has_value { 2 } else { 1 };
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if server {
        rt.block_on(serve(if port < 0 { 9000 } else { port as u16 }));
        return;
    }
    if port <= 0 || port > 65535 || samples < 2 || sample_ms <= 0.0 || warmup_ms < 0.0 {
        usage();
    }
    let out = rt.block_on(async move {
        let mut c = Client { addr: format!("{host}:{port}"), seq: 0 };
        let mut out = format!(
            "{{\"schema\":\"galay-latency/1\",\"implementation\":\"tokio-current_thread\",\"server\":\"tokio_latency server\",\"samples\":{samples},\"sample_ms\":{sample_ms},\"warmup_ms\":{warmup_ms},\"benchmarks\":["
        );
        for (k, d) in BENCHES.iter().enumerate() {
            let mut persistent = if d.new_connection { None } else { Some(c.dial().await) };
            let w0 = Instant::now();
            let mut warm = 0u64;
            loop {
                c.run(d, 1, &mut persistent, None).await;
                warm += 1;
                if w0.elapsed().as_nanos() as f64 >= warmup_ms * 1e6 {
                    break;
                }
            }
            let per = w0.elapsed().as_nanos() as f64 / warm as f64;
            let iterations = (sample_ms * 1e6 / per).ceil().max(1.0) as u64;
            let mut sample_ns = Vec::new();
            let mut sample_iterations = Vec::new();
            let mut iteration_ns = Vec::with_capacity(iterations as usize * samples);
            for _ in 0..samples {
                let t0 = Instant::now();
                c.run(d, iterations, &mut persistent, Some(&mut iteration_ns)).await;
                sample_ns.push(t0.elapsed().as_nanos() as i64);
                sample_iterations.push(iterations);
            }
            drop(persistent);
            if !json {
                let mean: f64 = sample_ns.iter().zip(&sample_iterations).map(|(t, n)| *t as f64 / *n as f64).sum::<f64>() / samples as f64;
                println!("{:<36} {:>10.3} us per iteration (mean of {samples} samples)", d.name, mean / 1e3);
            }
            let _ = write!(
                out,
                "{}{{\"name\":\"{}\",\"message_bytes\":{},\"round_trips_per_iteration\":{},\"new_connection\":{},\"sample_iterations\":{},\"sample_ns\":{},\"iteration_ns\":{}}}",
                if k > 0 { "," } else { "" },
                d.name,
                d.bytes,
                d.round_trips,
                d.new_connection,
                json_list(&sample_iterations),
                json_list(&sample_ns),
                json_list(&iteration_ns)
            );
        }
        out.push_str("]}");
        out
    });
    if json {
        println!("{out}");
    }
}
