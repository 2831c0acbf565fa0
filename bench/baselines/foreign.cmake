# The floors of the foreign-library comparison: raw_pg (libpq on a hand-written epoll loop),
# curl_multi_loop (curl multi on its own curl_multi_poll loop) and raw_curl (curl multi's socket
# and timer callbacks on a hand-written epoll loop). Optimised like every baseline.
include(${PROJECT_SOURCE_DIR}/cmake/foreign_libs.cmake)
if(TARGET PkgConfig::LIBPQ)
  add_executable(raw_pg pg_epoll.cpp)
  target_link_libraries(raw_pg PRIVATE PkgConfig::LIBPQ galay-cli nlohmann_json::nlohmann_json)
  target_compile_options(raw_pg PRIVATE ${baseline_opt})
endif()
if(TARGET PkgConfig::LIBCURL)
  add_executable(curl_multi_loop curl_multi_poll.cpp)
  target_link_libraries(curl_multi_loop
                        PRIVATE PkgConfig::LIBCURL galay-cli nlohmann_json::nlohmann_json)
  target_compile_options(curl_multi_loop PRIVATE ${baseline_opt})
  add_executable(raw_curl curl_epoll.cpp)
  target_link_libraries(raw_curl PRIVATE PkgConfig::LIBCURL galay-cli nlohmann_json::nlohmann_json)
  target_compile_options(raw_curl PRIVATE ${baseline_opt})
endif()
