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
  add_test(NAME postgres_harness_py
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench/test_postgres_harness.py)
  set_tests_properties(postgres_harness_py PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77)
  if(TARGET raw_pg AND TARGET pg_threads)
    add_test(NAME foreign_pg_clients_py
             COMMAND ${Python3_EXECUTABLE}
                     ${CMAKE_CURRENT_SOURCE_DIR}/bench/test_foreign_pg_clients.py
                     $<TARGET_FILE_DIR:raw_pg>)
    set_tests_properties(foreign_pg_clients_py PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77)
  endif()
  if(TARGET curl_multi_loop AND TARGET curl_threads)
    add_test(NAME foreign_curl_clients_py
             COMMAND ${Python3_EXECUTABLE}
                     ${CMAKE_CURRENT_SOURCE_DIR}/bench/test_foreign_curl_clients.py
                     $<TARGET_FILE_DIR:curl_multi_loop>)
    set_tests_properties(foreign_curl_clients_py PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77)
  endif()
  # Builds them first (cargo, go; minutes the first time, cached after): a long timeout.
  add_test(NAME foreign_controls_py
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench/test_foreign_controls.py)
  set_tests_properties(foreign_controls_py PROPERTIES TIMEOUT 1200 SKIP_RETURN_CODE 77)
endif()
