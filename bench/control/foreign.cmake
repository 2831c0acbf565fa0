# The blocking controls of the foreign-library comparison: pg_threads (a blocking libpq connection
# per thread) and curl_threads (curl_easy_perform per thread). They share the floors' command line
# and report (bench/baselines/foreign_client.hpp). The Rust and Go controls (tokio_postgres,
# go_pgx) are built by the study and its test with cargo and go.
include(${PROJECT_SOURCE_DIR}/cmake/foreign_libs.cmake)
foreach(pair "pg_threads;LIBPQ" "curl_threads;LIBCURL")
  list(GET pair 0 tool)
  list(GET pair 1 lib)
  if(TARGET PkgConfig::${lib})
    add_executable(${tool} blocking/${tool}.cpp)
    target_include_directories(${tool} PRIVATE ${PROJECT_SOURCE_DIR}/bench/baselines)
    target_link_libraries(${tool} PRIVATE PkgConfig::${lib} Threads::Threads galay-cli
                                          nlohmann_json::nlohmann_json)
    target_compile_options(${tool} PRIVATE $<$<NOT:$<CONFIG:Release>>:-O2>)
  endif()
endforeach()
