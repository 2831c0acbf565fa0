// README examples compiled as the README shows them (CMake extracts each block into
// readme_<name>.inc). Each gets the little it takes for granted, declared but not defined:
// nothing here is linked. The test is that this file compiles.
#include <galay/galay.hpp>

#include <memory>
#include <string>

using namespace std::chrono_literals;

namespace readme_pubsub {
struct Msg {
    std::string text;
};
void deliver(const Msg& m);
void mark(const galay::SocketAddr& backend, bool up);
#include "readme_pubsub.inc"
} // namespace readme_pubsub
