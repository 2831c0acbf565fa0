// pg_pgx: the Go pgx control group of galay's PostgreSQL comparison, with raw_pg's command line
// and JSON fields.
//
//	pg_pgx --conninfo STR [--connections 16] [--duration 5] [--warmup 1]
//	       [--mode single|pipeline] [--depth 16] [--prepared] [--json]
//
// One goroutine per connection (pgx.Conn is not shared). `single`: QueryRow of
// `SELECT $1::int` in a loop, one query in flight per connection. `pipeline`: pgx's batch API:
// --depth queries queued in a pgx.Batch, sent with SendBatch (one round trip: every query, then
// one Sync), their rows read, the batch closed, and again: connections x depth in flight. The
// statement: QueryExecModeExec (the unnamed statement with the parameter's type from its Go
// type, text formats: what PQsendQueryParams sends), or with --prepared pgx's default
// QueryExecModeCacheStatement (prepared once per connection, binary formats). The value that
// comes back is compared with the one sent.
//
// Measured: queries completed, wall time and this process's CPU (getrusage) over --duration
// seconds after --warmup; then no new query starts and the ones in flight are waited for (10 s).
// A connection lost ends its goroutine with one error; the run ends when all are lost.
// Exit 0 with no error, 1 with errors or when a connection cannot be made (one line), 2 on
// bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const tool = "pg_pgx"
const sql = "SELECT $1::int"

type state struct {
	stop       atomic.Bool
	next, done atomic.Uint64
	mu         sync.Mutex
	errors     uint64
	lost       int
	firstError string
	conns      int
	allLost    chan struct{} // closed when every connection has been lost
}

func (s *state) error(what string, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errors == 0 {
		s.firstError = strings.Join(strings.Fields(what), " ")
	}
	s.errors++
	if lost {
		s.lost++
		if s.lost == s.conns {
			close(s.allLost)
		}
	}
}

// pause sleeps `secs`, or less when every connection has been lost.
func (s *state) pause(secs float64) {
	select {
	case <-time.After(time.Duration(secs * float64(time.Second))):
	case <-s.allLost:
	}
}

func (s *state) value() int32 { return int32(s.next.Add(1) & 0x7fffffff) }

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)*1e-6 }
	return t(ru.Utime) + t(ru.Stime)
}

// check records one reply: its error, or the value that came back for `sent`. It says whether
// the connection can go on.
func check(s *state, c *pgx.Conn, err error, sent, got int32) bool {
	if err == nil {
		if got == sent {
			s.done.Add(1)
		} else {
			s.error(fmt.Sprintf("sent %d, got back %d", sent, got), false)
		}
		return true
	}
	if c.IsClosed() || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		s.error("connection lost: "+err.Error(), true)
		return false
	}
	s.error(err.Error(), false)
	return !c.IsClosed()
}

func single(ctx context.Context, s *state, c *pgx.Conn) {
	for !s.stop.Load() {
		v := s.value()
		var got int32
		err := c.QueryRow(ctx, sql, v).Scan(&got)
		if !check(s, c, err, v, got) {
			return
		}
	}
}

func batches(ctx context.Context, s *state, c *pgx.Conn, depth int) {
	sent := make([]int32, depth)
	for !s.stop.Load() {
		b := &pgx.Batch{}
		for i := range sent {
			sent[i] = s.value()
			b.Queue(sql, sent[i])
		}
		br := c.SendBatch(ctx, b)
		ok := true
		for i := range sent {
			var got int32
			err := br.QueryRow().Scan(&got)
			ok = check(s, c, err, sent[i], got) && ok
			if !ok {
				break
			}
		}
		if err := br.Close(); err != nil && ok {
			ok = check(s, c, err, 0, 0)
		}
		if !ok {
			return
		}
	}
}

func main() {
	fs := flag.NewFlagSet(tool, flag.ContinueOnError)
	conninfo := fs.String("conninfo", "", "libpq-style connection string or URL (required)")
	connections := fs.Int("connections", 16, "connections, one goroutine each")
	duration := fs.Float64("duration", 5, "measured seconds")
	warmup := fs.Float64("warmup", 1, "seconds before measuring")
	mode := fs.String("mode", "single", "single: one query in flight per connection; "+
		"pipeline: batches of --depth")
	depth := fs.Int("depth", 16, "pipeline: queries per batch (per Sync)")
	prepared := fs.Bool("prepared", false, "prepare the statement once per connection")
	asJSON := fs.Bool("json", false, "print one JSON object")
	fs.SetOutput(io.Discard)
	usage := func(what string) {
		fmt.Fprintf(os.Stderr, "%s: error: %s (see --help)\n", tool, what)
		os.Exit(2)
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println("pg_pgx: Go pgx, SELECT $1::int over N connections (a control of the " +
				"PostgreSQL comparison)\nUsage: pg_pgx --conninfo STR [OPTIONS]")
			fs.VisitAll(func(f *flag.Flag) {
				fmt.Printf("  --%-12s %s (default %q)\n", f.Name, f.Usage, f.DefValue)
			})
			os.Exit(0)
		}
		usage(err.Error())
	}
	switch {
	case fs.NArg() > 0:
		usage("unknown argument " + fs.Arg(0))
	case *conninfo == "":
		usage("--conninfo is required")
	case *connections < 1 || *connections > 10000:
		usage(fmt.Sprintf("--connections: %d not in range 1 to 10000", *connections))
	case !(*duration > 0 && *duration <= 86400):
		usage(fmt.Sprintf("--duration: %g not in range", *duration))
	case !(*warmup >= 0 && *warmup <= 86400):
		usage(fmt.Sprintf("--warmup: %g not in range", *warmup))
	case *mode != "single" && *mode != "pipeline":
		usage("--mode: " + *mode + " not in {single,pipeline}")
	case *depth < 1 || *depth > 100000:
		usage(fmt.Sprintf("--depth: %d not in range 1 to 100000", *depth))
	}
	pipeline := *mode == "pipeline"

	cfg, err := pgx.ParseConfig(*conninfo)
	if err != nil {
		usage("--conninfo: " + err.Error())
	}
	statement := "params"
	if *prepared {
		statement = "prepared"
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	} else {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	ctx := context.Background()
	conns := make([]*pgx.Conn, *connections)
	for i := range conns {
		if conns[i], err = pgx.ConnectConfig(ctx, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "%s: connect: %s\n", tool, strings.Join(strings.Fields(err.Error()), " "))
			os.Exit(1)
		}
	}
	s := &state{conns: *connections, allLost: make(chan struct{})}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func(c *pgx.Conn) {
			defer wg.Done()
			if pipeline {
				batches(ctx, s, c, *depth)
			} else {
				single(ctx, s, c)
			}
		}(c)
	}
	s.pause(*warmup)
	t0, c0, n0 := time.Now(), cpuSeconds(), s.done.Load()
	s.pause(*duration)
	secs, cpu, n := time.Since(t0).Seconds(), cpuSeconds()-c0, s.done.Load()-n0
	s.stop.Store(true)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		s.error("no reply within 10 s after the run", false)
	}

	inflight, d := *connections, 1
	if pipeline {
		inflight, d = *connections**depth, *depth
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var per any
	if n > 0 {
		per = cpu * 1e6 / float64(n)
	}
	qps := 0.0
	if secs > 0 {
		qps = float64(n) / secs
	}
	if *asJSON {
		out, _ := json.Marshal(map[string]any{
			"implementation": tool, "mode": *mode, "statement": statement,
			"connections": *connections, "depth": d, "inflight": inflight, "warmup_s": *warmup,
			"queries": n, "seconds": secs, "queries_per_s": qps, "client_cpu_s": cpu,
			"client_cpu_us_per_query": per, "total_queries": s.done.Load(), "errors": s.errors,
			"connections_lost": s.lost, "first_error": s.firstError,
		})
		fmt.Println(string(out))
	} else {
		us := 0.0
		if n > 0 {
			us = cpu * 1e6 / float64(n)
		}
		line := fmt.Sprintf("%s %s: %d queries in %.2f s: %.0f queries/s, client CPU %.2f us/query, "+
			"%d errors (%d connections, %d in flight)", tool, *mode, n, secs, qps, us, s.errors,
			*connections, inflight)
		if s.firstError != "" {
			line += "; first error: " + s.firstError
		}
		fmt.Println(line)
	}
	if s.errors > 0 {
		os.Exit(1)
	}
}
