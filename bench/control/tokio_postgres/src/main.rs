//! pg_tokio: the tokio-postgres control group of galay's PostgreSQL comparison, with raw_pg's
//! command line and JSON fields.
//!
//!   pg_tokio --conninfo STR [--connections 16] [--duration 5] [--warmup 1]
//!            [--mode single|pipeline] [--inflight 1000] [--prepared] [--json]
//!
//! One thread (a current-thread runtime), N connections, each driven by tokio-postgres's own
//! connection task. `single`: one task per connection running `SELECT $1::int` in a loop.
//! `pipeline`: --inflight tasks split evenly over the connections, each running the same loop:
//! the driver pipelines the queries that are waiting on one connection by itself (each query
//! carries its own Sync: depth 1). The query is `query_typed` (Parse of the unnamed statement
//! with the parameter's type given, Bind, Execute, Sync: what PQsendQueryParams sends), or with
//! --prepared a statement prepared once per connection (`prepare_typed`, then Bind, Execute,
//! Sync). tokio-postgres asks for binary results; the value that comes back is compared with
//! the one sent.
//!
//! Measured: queries completed, wall time and this process's CPU (getrusage) over --duration
//! seconds after --warmup; then no new query starts and the ones in flight are waited for (10 s).
//! A connection lost ends its tasks, each with one error; the run ends when all are lost.
//! Exit 0 with no error, 1 with errors or when a connection cannot be made (one line), 2 on
//! bad flags.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};

const TOOL: &str = "pg_tokio";
const SQL: &str = "SELECT $1::int";

struct Opts {
    conninfo: String,
    connections: usize,
    duration: f64,
    warmup: f64,
    pipeline: bool,
    inflight: usize,
    prepared: bool,
    json: bool,
}

fn usage(what: &str) -> ! {
    eprintln!("{TOOL}: error: {what} (see --help)");
    std::process::exit(2);
}

const HELP: &str = "pg_tokio: tokio-postgres on one thread, SELECT $1::int over N connections \
(a control of the PostgreSQL comparison)
Usage: pg_tokio --conninfo STR [OPTIONS]
  --conninfo STR     libpq-style connection string or URL (required)
  --connections N    connections (default 16)
  --duration S       measured seconds (default 5)
  --warmup S         seconds before measuring (default 1)
  --mode M           single: one query in flight per connection; pipeline: --inflight in all
  --inflight N       pipeline: queries in flight across the connections (default 1000)
  --prepared         prepare the statement once per connection
  --json             print one JSON object";

fn parse() -> Opts {
    let mut o = Opts {
        conninfo: String::new(),
        connections: 16,
        duration: 5.0,
        warmup: 1.0,
        pipeline: false,
        inflight: 1000,
        prepared: false,
        json: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> String {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name}: a value is required")))
        };
        fn number<T: std::str::FromStr + PartialOrd>(name: &str, v: String, lo: T, hi: T) -> T {
            match v.parse::<T>() {
                Ok(x) if x >= lo && x <= hi => x,
                _ => usage(&format!("{name}: {v} is not a number in range")),
            }
        }
        match a.as_str() {
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            "--conninfo" => o.conninfo = value("--conninfo"),
            "--connections" => {
                o.connections = number("--connections", value("--connections"), 1, 10000)
            }
            "--duration" => o.duration = number("--duration", value("--duration"), 0.001, 86400.0),
            "--warmup" => o.warmup = number("--warmup", value("--warmup"), 0.0, 86400.0),
            "--inflight" => o.inflight = number("--inflight", value("--inflight"), 1, 10_000_000),
            "--mode" => match value("--mode").as_str() {
                "single" => o.pipeline = false,
                "pipeline" => o.pipeline = true,
                m => usage(&format!("--mode: {m} not in {{single,pipeline}}")),
            },
            "--prepared" => o.prepared = true,
            "--json" => o.json = true,
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    if o.conninfo.is_empty() {
        usage("--conninfo is required");
    }
    if o.pipeline && o.inflight < o.connections {
        usage(&format!(
            "--inflight: {} is fewer than --connections {}",
            o.inflight, o.connections
        ));
    }
    o
}

fn cpu_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The server's message when there is one (tokio-postgres's Display says only "db error"),
/// else the error and its cause.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// What every task shares (one thread: no locks).
struct State {
    stop: Cell<bool>,
    next: Cell<u64>,
    done: Cell<u64>,
    errors: Cell<u64>,
    lost: Cell<u64>,
    first_error: RefCell<String>,
    connections: u64,
    all_lost: tokio::sync::Notify,
}

impl State {
    fn error(&self, what: String) {
        if self.errors.get() == 0 {
            *self.first_error.borrow_mut() = one_line(&what);
        }
        self.errors.set(self.errors.get() + 1);
    }
}

struct Conn {
    client: Client,
    stmt: Option<Statement>,
    lost: Cell<bool>,
}

async fn run_queries(conn: Rc<Conn>, st: Rc<State>) {
    while !st.stop.get() && !conn.lost.get() {
        let n = st.next.get();
        st.next.set(n + 1);
        let v = (n & 0x7fff_ffff) as i32;
        let rows = match &conn.stmt {
            Some(s) => conn.client.query(s, &[&v]).await,
            None => conn.client.query_typed(SQL, &[(&v, Type::INT4)]).await,
        };
        match rows {
            Ok(rows) if rows.len() == 1 => match rows[0].try_get::<_, i32>(0) {
                Ok(got) if got == v => st.done.set(st.done.get() + 1),
                Ok(got) => st.error(format!("sent {v}, got back {got}")),
                Err(e) => st.error(format!("reading the value: {e}")),
            },
            Ok(rows) => st.error(format!("expected 1 row, got {}", rows.len())),
            Err(e) => {
                if conn.client.is_closed() {
                    st.error(format!("connection lost: {}", describe(&e)));
                    if !conn.lost.replace(true) {
                        st.lost.set(st.lost.get() + 1);
                        if st.lost.get() == st.connections {
                            st.all_lost.notify_one();
                        }
                    }
                } else {
                    st.error(describe(&e));
                }
            }
        }
    }
}

/// Sleeps `secs`, or less when every connection has been lost.
async fn pause(st: &State, secs: f64) {
    if st.lost.get() < st.connections {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(secs)) => {}
            _ = st.all_lost.notified() => {}
        }
    }
}

async fn connect(o: &Opts) -> Result<Rc<Conn>, String> {
    let (client, connection) = tokio_postgres::connect(&o.conninfo, NoTls)
        .await
        .map_err(|e| describe(&e))?;
    tokio::task::spawn_local(async move {
        let _ = connection.await; // its error reaches the queries in flight
    });
    let stmt = if o.prepared {
        Some(
            client
                .prepare_typed(SQL, &[Type::INT4])
                .await
                .map_err(|e| describe(&e))?,
        )
    } else {
        None
    };
    Ok(Rc::new(Conn {
        client,
        stmt,
        lost: Cell::new(false),
    }))
}

async fn run(o: Opts) -> i32 {
    let mut conns = Vec::new();
    for _ in 0..o.connections {
        match connect(&o).await {
            Ok(c) => conns.push(c),
            Err(e) => {
                eprintln!("{TOOL}: connect: {}", one_line(&e));
                return 1;
            }
        }
    }
    let st = Rc::new(State {
        stop: Cell::new(false),
        next: Cell::new(0),
        done: Cell::new(0),
        errors: Cell::new(0),
        lost: Cell::new(0),
        first_error: RefCell::new(String::new()),
        connections: o.connections as u64,
        all_lost: tokio::sync::Notify::new(),
    });
    let mut tasks = Vec::new();
    let inflight = if o.pipeline {
        o.inflight
    } else {
        o.connections
    };
    for (i, c) in conns.iter().enumerate() {
        let share = inflight / o.connections + usize::from(i < inflight % o.connections);
        for _ in 0..share {
            tasks.push(tokio::task::spawn_local(run_queries(c.clone(), st.clone())));
        }
    }
    pause(&st, o.warmup).await;
    let (t0, c0, n0) = (Instant::now(), cpu_s(), st.done.get());
    pause(&st, o.duration).await;
    let (secs, cpu, n) = (t0.elapsed().as_secs_f64(), cpu_s() - c0, st.done.get() - n0);
    st.stop.set(true);
    let drain = async {
        for t in tasks {
            let _ = t.await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .is_err()
    {
        st.error("no reply within 10 s after the run".to_string());
    }
    let qps = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let per = if n > 0 {
        format!("{}", cpu * 1e6 / n as f64)
    } else {
        "null".to_string()
    };
    let mode = if o.pipeline { "pipeline" } else { "single" };
    let statement = if o.prepared { "prepared" } else { "params" };
    if o.json {
        println!(
            "{{\"implementation\":\"{TOOL}\",\"mode\":\"{mode}\",\"statement\":\"{statement}\",\
             \"connections\":{},\"depth\":1,\"inflight\":{inflight},\"warmup_s\":{},\
             \"queries\":{n},\"seconds\":{secs},\"queries_per_s\":{qps},\"client_cpu_s\":{cpu},\
             \"client_cpu_us_per_query\":{per},\"total_queries\":{},\"errors\":{},\
             \"connections_lost\":{},\"first_error\":{}}}",
            o.connections,
            o.warmup,
            st.done.get(),
            st.errors.get(),
            st.lost.get(),
            json_string(&st.first_error.borrow())
        );
    } else {
        let mut line = format!(
            "{TOOL} {mode}{}: {n} queries in {secs:.2} s: {qps:.0} queries/s, client CPU {:.2} \
             us/query, {} errors ({} connections, {inflight} in flight)",
            if o.prepared { " prepared" } else { "" },
            if n > 0 { cpu * 1e6 / n as f64 } else { 0.0 },
            st.errors.get(),
            o.connections
        );
        if st.errors.get() > 0 {
            line += &format!("; first error: {}", st.first_error.borrow());
        }
        println!("{line}");
    }
    if st.errors.get() == 0 {
        0
    } else {
        1
    }
}

fn main() {
    let o = parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let code = local.block_on(&rt, run(o));
    // Tasks still waiting on a server that never answered are not waited for.
    std::process::exit(code);
}
