// go_tls_client: a peer on Go's own TLS stack (crypto/tls), for interop tests of galay's TLS
// server: connect, verify the server against a given CA and name, send bytes, read the same
// number of bytes back and compare them (the server is expected to echo), close with
// close_notify.
//
//	go_tls_client -addr 127.0.0.1:8443 -ca CA.pem [-name localhost] [-bytes 65536] [-alpn P]
//	              [-timeout 10s]
//
// Byte i of the message is 'a' + i%26. Prints one line with the negotiated version, cipher and
// ALPN protocol on success. Exit 0: the echo matched; 1: a connection, handshake, verification
// or echo failure (one line on stderr saying which); 2: bad flags.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"galay.dev/bench/go_https/cli"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_tls_client: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	addr := flag.String("addr", "", "HOST:PORT of the TLS server")
	caFile := flag.String("ca", "", "PEM CA certificate(s) that must sign the server's chain")
	name := flag.String("name", "localhost", "name the server's certificate must carry (SNI too)")
	n := flag.Int("bytes", 1024, "bytes to send and expect back (0: handshake only)")
	alpn := flag.String("alpn", "", "ALPN protocol to offer (none when empty)")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline for the whole exchange")
	cli.Parse("go_tls_client", "A TLS client on Go's crypto/tls: connect, verify, send bytes, "+
		"expect them echoed.")
	switch {
	case *addr == "":
		cli.Fail("go_tls_client", "--addr: is required")
	case *caFile == "":
		cli.Fail("go_tls_client", "--ca: is required")
	case *n < 0:
		cli.Fail("go_tls_client", fmt.Sprintf("--bytes: %d is negative", *n))
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail("%v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail("%s: no PEM certificate in it", *caFile)
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: *name}
	if *alpn != "" {
		cfg.NextProtos = []string{*alpn}
	}
	dialer := &net.Dialer{Timeout: *timeout}
	conn, err := tls.DialWithDialer(dialer, "tcp", *addr, cfg)
	if err != nil {
		fail("handshake with %s: %v", *addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(*timeout))

	msg := make([]byte, *n)
	for i := range msg {
		msg[i] = byte('a' + i%26)
	}
	// Write and read at once: a large message would otherwise fill both directions' buffers.
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(msg)
		werr <- err
	}()
	got := make([]byte, *n)
	if _, err := io.ReadFull(conn, got); err != nil {
		fail("reading the echo of %d bytes: %v", *n, err)
	}
	if err := <-werr; err != nil {
		fail("sending %d bytes: %v", *n, err)
	}
	if !bytes.Equal(got, msg) {
		i := 0
		for i < len(got) && got[i] == msg[i] {
			i++
		}
		fail("echo differs at byte %d of %d", i, *n)
	}
	if err := conn.CloseWrite(); err != nil {
		fail("close_notify: %v", err)
	}
	st := conn.ConnectionState()
	fmt.Printf("ok: %d bytes echoed, %s, %s, alpn %q\n", *n, tls.VersionName(st.Version),
		tls.CipherSuiteName(st.CipherSuite), st.NegotiatedProtocol)
}
