module galay-kernel/bench/control/go_latency

go 1.22
