module galay.dev/bench/go_https

go 1.21
