// A program with two coroutine forms g++ 12 miscompiles: galay_check_coroutines, from the installed
// package, must stop its build and name both by line: a co_await in a condition (line 13) and an
// aggregate temporary of a galay type (line 14), which it knows only from the installed headers.
#include <galay/galay.hpp>

#include <string>

galay::Task<unsigned> workers(galay::RuntimeOptions options) {
    co_return options.workers;
}

galay::Task<int> send(galay::TcpStream& s, const std::string& text) {
    if (!co_await s.send_all(text)) co_return 1;
    auto n = co_await workers(galay::RuntimeOptions{.workers = 2});
    co_return static_cast<int>(n);
}

int main() {
    return 0;
}
