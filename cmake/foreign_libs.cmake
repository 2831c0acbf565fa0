# The C libraries of the foreign-library comparison (PostgreSQL's libpq, libcurl), found once by
# pkg-config for every directory that builds against them (bench/baselines, bench/control,
# tests). A missing one is one configure line and turns its programs and tests off.
include_guard(GLOBAL)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBPQ QUIET IMPORTED_TARGET GLOBAL libpq)
  pkg_check_modules(LIBCURL QUIET IMPORTED_TARGET GLOBAL libcurl)
endif()
if(NOT TARGET PkgConfig::LIBPQ)
  message(STATUS "galay libpq programs (raw_pg, pg_threads, the PostgreSQL tests): not built "
                 "(no libpq by pkg-config: apt-get install libpq-dev)")
endif()
if(NOT TARGET PkgConfig::LIBCURL)
  message(STATUS "galay libcurl programs (curl_multi_loop, curl_threads, their test): not built "
                 "(no libcurl by pkg-config: apt-get install libcurl4-openssl-dev)")
endif()
