# Cross builds with Zig's C/C++ toolchain (`make cross`): macOS and FreeBSD, from Linux. Included
# by the per-target files (zig-aarch64-macos.cmake ...), which set GALAY_ZIG_TARGET first. The
# compiler is `python3 -m ziglang c++ -target <target>` (cmake/zig/, the version in
# cmake/zig.lock); it brings the target's libc headers and libc++, so nothing of this machine's
# /usr/include is seen. These builds compile and link; they cannot run here.
if(NOT GALAY_ZIG_TARGET)
  message(FATAL_ERROR "set GALAY_ZIG_TARGET (e.g. aarch64-macos) before including zig.cmake")
endif()
if(GALAY_ZIG_TARGET MATCHES "macos")
  set(CMAKE_SYSTEM_NAME Darwin)
  # No Xcode SDK here: Zig's own macOS headers and libraries stand in for it.
  set(CMAKE_OSX_SYSROOT "" CACHE PATH "" FORCE)
  set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "" FORCE)
elseif(GALAY_ZIG_TARGET MATCHES "freebsd")
  set(CMAKE_SYSTEM_NAME FreeBSD)
endif()
string(REGEX MATCH "^[^-]+" CMAKE_SYSTEM_PROCESSOR "${GALAY_ZIG_TARGET}")

set(_zig_dir ${CMAKE_CURRENT_LIST_DIR}/../zig)
set(CMAKE_C_COMPILER ${_zig_dir}/zig-cc)
set(CMAKE_CXX_COMPILER ${_zig_dir}/zig-c++)
set(CMAKE_AR ${_zig_dir}/zig-ar CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB ${_zig_dir}/zig-ranlib CACHE FILEPATH "" FORCE)
# Without -fsanitize=undefined, which Zig adds to unoptimised C and C++ by default: these builds
# only compile and link, and its runtime would be one more library Zig builds for each target.
# GALAY_ZIG_FLAGS (environment) is added to every compile and link, CMake's own compiler checks
# included (`make cross` passes -g0 -s; Zig builds its runtime libraries once for each set of
# link flags, so the checks must link with the same ones).
set(_zig_flags "-target ${GALAY_ZIG_TARGET} -fno-sanitize=undefined $ENV{GALAY_ZIG_FLAGS}")
set(CMAKE_C_FLAGS_INIT "${_zig_flags}")
set(CMAKE_CXX_FLAGS_INIT "${_zig_flags}")
# Libraries, packages and pkg-config files of this machine are Linux's: never take them for the
# target. The header-only libraries the build uses (CLI11, moodycamel's concurrentqueue, from
# Debian's packages) are seen through a root that holds links to them alone, so that no other
# header of /usr/include can reach the target's compilation.
set(_root ${CMAKE_BINARY_DIR}/cross-root)
if(NOT CMAKE_BINARY_DIR MATCHES "CMakeScratch|CMakeTmp") # not in CMake's compiler checks
  file(MAKE_DIRECTORY ${_root}/include ${_root}/share/cmake/CLI11 ${_root}/lib/pkgconfig)
  foreach(_dir CLI concurrentqueue)
    if(NOT EXISTS ${_root}/include/${_dir} AND EXISTS /usr/include/${_dir})
      file(CREATE_LINK /usr/include/${_dir} ${_root}/include/${_dir} SYMBOLIC)
    endif()
  endforeach()
  foreach(_file CLI11Config.cmake CLI11ConfigVersion.cmake)
    if(NOT EXISTS ${_root}/share/cmake/CLI11/${_file} AND EXISTS /usr/share/cmake/CLI11/${_file})
      file(CREATE_LINK /usr/share/cmake/CLI11/${_file} ${_root}/share/cmake/CLI11/${_file}
           SYMBOLIC)
    endif()
  endforeach()
endif()
set(ENV{PKG_CONFIG_LIBDIR} ${_root}/lib/pkgconfig) # empty: libpq, libcurl are off
set(ENV{PKG_CONFIG_PATH} "")
set(CMAKE_FIND_ROOT_PATH ${_root})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
