module galay.dev/bench/go_http

go 1.21
