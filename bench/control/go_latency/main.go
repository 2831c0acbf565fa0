// go_latency: the latency study's five benchmarks with Go's net package at both ends, on one OS
// thread of Go code (GOMAXPROCS=1), a control group of bench/studies/latency.py.
//
//	go_latency server -p 9000
//	go_latency -h 127.0.0.1 -p 9000 [-n 30] [--sample-ms 5] [--warmup-ms 200] [--json]
//
// The benchmarks, their calibration and the JSON schema are those of bench_latency and of every
// control group (bench/control/README.md). Exit 1 on any I/O error or wrong echo, 2 on bad flags.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"
)

type benchDef struct {
	name          string
	bytes         int
	roundTrips    int
	newConnection bool
}

var benches = []benchDef{
	{"network_latency_100B", 100, 1, true},
	{"network_latency_1000B", 1000, 1, true},
	{"connection_strategy/new_connection", 256, 1, true},
	{"connection_strategy/reuse", 256, 1, false},
	{"throughput_100_messages", 256, 100, false},
}

type benchResult struct {
	Name             string  `json:"name"`
	MessageBytes     int     `json:"message_bytes"`
	RoundTrips       int     `json:"round_trips_per_iteration"`
	NewConnection    bool    `json:"new_connection"`
	SampleIterations []int64 `json:"sample_iterations"`
	SampleNs         []int64 `json:"sample_ns"`
	IterationNs      []int64 `json:"iteration_ns"`
}

type report struct {
	Schema         string        `json:"schema"`
	Implementation string        `json:"implementation"`
	Server         string        `json:"server"`
	Samples        int           `json:"samples"`
	SampleMs       float64       `json:"sample_ms"`
	WarmupMs       float64       `json:"warmup_ms"`
	Benchmarks     []benchResult `json:"benchmarks"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_latency: "+format+"\n", args...)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go_latency server [-p port]\n"+
		"       go_latency -h host -p port [-n samples] [--sample-ms ms] [--warmup-ms ms] [--json]")
	os.Exit(2)
}

func serve(port int) {
	l, err := net.Listen("tcp4", ":"+strconv.Itoa(port))
	if err != nil {
		fail("cannot listen on port %d: %v", port, err)
	}
	fmt.Printf("listening on 0.0.0.0:%d (go_latency)\n", l.Addr().(*net.TCPAddr).Port)
	for {
		c, err := l.Accept()
		if err != nil {
			continue
		}
		go func(c net.Conn) { // (Go sets TCP_NODELAY on every TCP connection)
			defer c.Close()
			buf := make([]byte, 64*1024)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}(c)
	}
}

type client struct {
	addr string
	seq  uint64
}

func (c *client) dial() net.Conn {
	conn, err := net.Dial("tcp4", c.addr)
	if err != nil {
		fail("connect to %s: %v", c.addr, err)
	}
	return conn
}

func (c *client) roundTrip(conn net.Conn, out, in []byte) {
	c.seq++
	n := 8
	if len(out) < 8 {
		n = len(out)
	}
	var seq [8]byte
	binary.LittleEndian.PutUint64(seq[:], c.seq)
	copy(out[:n], seq[:n])
	if _, err := conn.Write(out); err != nil {
		fail("write: %v", err)
	}
	got, err := io.ReadFull(conn, in)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		fail("the server closed the connection after %d of %d echoed bytes", got, len(in))
	} else if err != nil {
		fail("read: %v", err)
	}
	if !bytes.Equal(in, out) {
		fail("echo mismatch")
	}
}

func (c *client) run(d benchDef, iterations int64, persistent net.Conn, times *[]int64) {
	out, in := make([]byte, d.bytes), make([]byte, d.bytes)
	for i := range out {
		out[i] = byte('a' + i%26)
	}
	for it := int64(0); it < iterations; it++ {
		t0 := time.Now()
		conn := persistent
		if d.newConnection {
			conn = c.dial()
		}
		for rt := 0; rt < d.roundTrips; rt++ {
			c.roundTrip(conn, out, in)
		}
		if d.newConnection {
			conn.Close()
		}
		if times != nil {
			*times = append(*times, time.Since(t0).Nanoseconds())
		}
	}
}

func main() {
	runtime.GOMAXPROCS(1)
	host, port, samples := "127.0.0.1", -1, 30
	sampleMs, warmupMs := 5.0, 200.0
	jsonOut, server := false, false
	args := os.Args[1:]
	value := func(i *int) string {
		if *i+1 >= len(args) {
			usage()
		}
		*i++
		return args[*i]
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			usage()
		}
		return v
	}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "server" && i == 0:
			server = true
		case a == "-h" || a == "--host":
			host = value(&i)
		case a == "-p" || a == "--port":
			port = int(num(value(&i)))
		case a == "-n" || a == "--samples":
			samples = int(num(value(&i)))
		case a == "--sample-ms":
			sampleMs = num(value(&i))
		case a == "--warmup-ms":
			warmupMs = num(value(&i))
		case a == "--json":
			jsonOut = true
		default:
			usage()
		}
	}
	if server {
		if port < 0 {
			port = 9000
		}
		serve(port)
		return
	}
	if port <= 0 || port > 65535 || samples < 2 || sampleMs <= 0 || warmupMs < 0 {
		usage()
	}
	c := &client{addr: net.JoinHostPort(host, strconv.Itoa(port))}
	rep := report{Schema: "galay-latency/1", Implementation: "go-net-GOMAXPROCS=1",
		Server: "go_latency server", Samples: samples, SampleMs: sampleMs, WarmupMs: warmupMs}
	for _, d := range benches {
		var persistent net.Conn
		if !d.newConnection {
			persistent = c.dial()
		}
		w0 := time.Now()
		warm := int64(0)
		for {
			c.run(d, 1, persistent, nil)
			warm++
			if time.Since(w0).Nanoseconds() >= int64(warmupMs*1e6) {
				break
			}
		}
		per := float64(time.Since(w0).Nanoseconds()) / float64(warm)
		iterations := int64(math.Max(1, math.Ceil(sampleMs*1e6/per)))
		r := benchResult{Name: d.name, MessageBytes: d.bytes, RoundTrips: d.roundTrips,
			NewConnection: d.newConnection, IterationNs: make([]int64, 0, iterations*int64(samples))}
		for s := 0; s < samples; s++ {
			t0 := time.Now()
			c.run(d, iterations, persistent, &r.IterationNs)
			r.SampleNs = append(r.SampleNs, time.Since(t0).Nanoseconds())
			r.SampleIterations = append(r.SampleIterations, iterations)
		}
		if persistent != nil {
			persistent.Close()
		}
		if !jsonOut {
			total := 0.0
			for i := range r.SampleNs {
				total += float64(r.SampleNs[i]) / float64(r.SampleIterations[i])
			}
			fmt.Printf("%-36s %10.3f us per iteration (mean of %d samples)\n", d.name,
				total/float64(samples)/1e3, samples)
		}
		rep.Benchmarks = append(rep.Benchmarks, r)
	}
	if jsonOut {
		b, err := json.Marshal(rep)
		if err != nil {
			fail("json: %v", err)
		}
		fmt.Println(string(b))
	}
}
