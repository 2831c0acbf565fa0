// go_https: the Go comparison server for HTTPS (net/http with ListenAndServeTLS), for
// bench/studies/tls.py.
//
//	GOMAXPROCS=1 go_https_server -port 8443 -cert CERT.pem -key KEY.pem
//
// GET / answers "Hello, World!" as text/plain, as bench/control/go_http does over plain HTTP;
// any other path is 404. TLS 1.3 only, so that every server of the comparison negotiates the
// same protocol (Go does not let the TLS 1.3 cipher suites be chosen: it picks AES-128-GCM when
// the CPU has AES instructions, as OpenSSL's default order does). HTTP/1.1 only (no h2 in
// ALPN): wrk speaks HTTP/1.1.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"

	"galay.dev/bench/go_https/cli"
)

func main() {
	port := flag.Int("port", 8443, "TCP port (0: a free one)")
	cert := flag.String("cert", "", "PEM certificate chain")
	key := flag.String("key", "", "PEM private key")
	cli.Parse("go_https_server", "The Go HTTPS server of the TLS study (net/http, TLS 1.3).")
	switch {
	case *port < 0 || *port > 65535:
		cli.Fail("go_https_server", fmt.Sprintf("--port: %d is outside 0 .. 65535", *port))
	case *cert == "":
		cli.Fail("go_https_server", "--cert: is required")
	case *key == "":
		cli.Fail("go_https_server", "--key: is required")
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_https_server: %v\n", err)
		os.Exit(1)
	}

	body := []byte("Hello, World!")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_https_server: %v\n", err)
		os.Exit(1)
	}
	srv := &http.Server{
		Handler: handler,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			MinVersion:   tls.VersionTLS13,
			NextProtos:   []string{"http/1.1"},
		},
		// A non-nil empty map keeps net/http from adding "h2" to ALPN.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	fmt.Printf("listening on 0.0.0.0:%d (go_https, GOMAXPROCS=%d)\n", ln.Addr().(*net.TCPAddr).Port,
		runtime.GOMAXPROCS(0))
	os.Stdout.Sync()
	if err := srv.ServeTLS(ln, "", ""); err != nil {
		fmt.Fprintf(os.Stderr, "go_https_server: %v\n", err)
		os.Exit(1)
	}
}
