# Cross build for x86_64-freebsd with Zig (make cross; see zig.cmake).
set(GALAY_ZIG_TARGET x86_64-freebsd)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
