// The program of docs/guide/thread-per-core.md ("A sharded store"), built as the page shows it
// and run by ctest: it exits 0 when every key came back from its shard.
#include "guide_thread_per_core.inc"
