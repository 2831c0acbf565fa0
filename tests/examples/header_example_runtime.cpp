// galay/runtime.hpp's opening example is a whole program (with `main`): built as it is shown and
// run by ctest (header_example_runtime). See header_examples.cpp for the other headers.
#include "example_runtime.inc"
