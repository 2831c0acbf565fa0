// go_http: the survey's Go comparison server (net/http), for bench/studies/http_servers.py.
//
//	GOMAXPROCS=1 go_http -port 8080 [-root DIR]
//
// GET / answers "Hello, World!" as text/plain (the survey replaced its HTML file by a constant
// for the Go comparison); other paths are files under -root (http.FileServer), or 404.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
)

func main() {
	port := flag.Int("port", 8080, "TCP port")
	root := flag.String("root", "", "directory of static files")
	flag.Parse()

	body := []byte("Hello, World!")
	var files http.Handler
	if *root != "" {
		files = http.FileServer(http.Dir(*root))
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/plain")
			w.Write(body)
			return
		}
		if files != nil {
			files.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_http: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("listening on 0.0.0.0:%d (go_http, GOMAXPROCS=%d)\n", ln.Addr().(*net.TCPAddr).Port,
		runtime.GOMAXPROCS(0))
	log.Fatal(http.Serve(ln, handler))
}
