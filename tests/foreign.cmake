# The foreign-library comparison's tests: a real PostgreSQL server for tests (support/postgres.hpp,
# the library galay_test_postgres) and its own test against libpq; the Python server fixture
# (bench/harness/postgres.py); the comparison clients against that server and against nginx;
# the Rust and Go controls where cargo and go are (each test SKIPs, exit 77, saying what is
# missing). Included at the end of tests/CMakeLists.txt.
include(${PROJECT_SOURCE_DIR}/cmake/foreign_libs.cmake)
if(TARGET PkgConfig::LIBPQ)
  add_library(galay_test_postgres STATIC support/postgres.cpp)
  target_include_directories(galay_test_postgres PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(galay_test_postgres PUBLIC PkgConfig::LIBPQ)
  add_executable(postgres_fixture_tests integration/postgres_fixture_test.cpp)
  target_link_libraries(postgres_fixture_tests PRIVATE galay_test_postgres GTest::gtest
                                                       GTest::gtest_main)
  gtest_discover_tests(postgres_fixture_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180)
endif()
if(Python3_Interpreter_FOUND)
  # A Python test of tests/bench/ (exit 77: SKIP), given ARGN (a bin directory).
  function(foreign_py_test name script timeout)
    add_test(NAME ${name}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench/${script} ${ARGN})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77)
  endfunction()
  foreign_py_test(postgres_harness_py test_postgres_harness.py 240)
  if(TARGET raw_pg AND TARGET pg_threads)
    foreign_py_test(foreign_pg_clients_py test_foreign_pg_clients.py 240
                    $<TARGET_FILE_DIR:raw_pg>)
  endif()
  if(TARGET galay_pg)
    foreign_py_test(galay_pg_py test_galay_pg.py 240 $<TARGET_FILE_DIR:galay_pg>)
  endif()
  if(TARGET curl_multi_loop AND TARGET curl_threads)
    set(galay_curl_arg "")
    if(TARGET galay_curl) # libcurl on galay's loop: the same checks, on each backend
      set(galay_curl_arg galay_curl)
    endif()
    foreign_py_test(foreign_curl_clients_py test_foreign_curl_clients.py 240
                    $<TARGET_FILE_DIR:curl_multi_loop> ${galay_curl_arg})
  endif()
  # Builds them first (cargo, go; minutes the first time, cached after): a long timeout.
  foreign_py_test(foreign_controls_py test_foreign_controls.py 1200)
endif()
# The PostgreSQL pool of examples/pg, pg_query and pg_http, on both backends against a real server.
if(TARGET galay_pg_pool AND TARGET galay_test_postgres)
  add_executable(pg_pool_tests integration/pg_pool_test.cpp)
  target_link_libraries(pg_pool_tests PRIVATE galay_pg_pool galay_test_postgres GTest::gtest
                                              GTest::gtest_main)
  target_include_directories(pg_pool_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  add_dependencies(pg_pool_tests pg_query pg_http)
  target_compile_definitions(pg_pool_tests PRIVATE PG_QUERY_BIN="$<TARGET_FILE:pg_query>"
                                                   PG_HTTP_BIN="$<TARGET_FILE:pg_http>")
  gtest_discover_tests(pg_pool_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 240)
endif()
# examples/curl (libcurl's multi interface on galay's loop): the library against a server of the
# test's own on both backends, and examples/curl_fetch against nginx on each backend.
if(TARGET galay_curl_multi)
  galay_test(curl_multi_tests integration/curl_multi_test.cpp)
  target_link_libraries(curl_multi_tests PRIVATE galay_curl_multi)
endif()
if(TARGET curl_fetch AND Python3_Interpreter_FOUND)
  set(curl_fetch_backends epoll)
  if(GALAY_WITH_URING)
    list(PREPEND curl_fetch_backends io_uring)
  endif()
  foreach(backend ${curl_fetch_backends})
    add_test(NAME curl_fetch_py_${backend}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/integration/curl_fetch_test.py
                     $<TARGET_FILE:curl_fetch> ${backend})
    set_tests_properties(curl_fetch_py_${backend} PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)
  endforeach()
endif()
