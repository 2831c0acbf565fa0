# Compile SOURCE with the warning WARNING made an error and check that exactly the lines marked
# `EXPECT-NODISCARD` are diagnosed (each of them, and nothing else).
#   cmake -DCXX=... -DSOURCE=... -DINCLUDE=... -P expect_diagnostics.cmake
if(NOT CXX OR NOT SOURCE OR NOT INCLUDE)
  message(FATAL_ERROR "usage: cmake -DCXX=<compiler> -DSOURCE=<file> -DINCLUDE=<dir> -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
# CXX_ID and CXX_FLAGS (optional): the compiler's CMake id and the build's flags (clang-16 with
# libc++ needs -stdlib=libc++; it spells the standard c++2b and the error limit -ferror-limit).
separate_arguments(extra UNIX_COMMAND "${CXX_FLAGS}")
if(CXX_ID STREQUAL "Clang")
  set(std -std=c++2b -ferror-limit=0)
else()
  set(std -std=c++23 -fmax-errors=0)
endif()
execute_process(
  COMMAND ${CXX} ${std} ${extra} -fsyntax-only -Wall -Wextra -Werror=unused-result
          -I${INCLUDE} ${SOURCE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)

get_filename_component(name ${SOURCE} NAME)
file(STRINGS ${SOURCE} lines)
set(expected "")
set(n 0)
foreach(line IN LISTS lines)
  math(EXPR n "${n} + 1")
  if(line MATCHES "EXPECT-NODISCARD" AND NOT line MATCHES "^//")
    list(APPEND expected ${n})
  endif()
endforeach()
list(LENGTH expected n_expected)
if(n_expected EQUAL 0)
  message(FATAL_ERROR "${name}: no line is marked EXPECT-NODISCARD")
endif()

# Every diagnostic of the compiler about this file: "<name>:<line>:<col>: error|warning: ...".
string(REGEX MATCHALL "${name}:[0-9]+:[0-9]+: (error|warning): [^\n]*" diags "${out}")
set(missing "")
foreach(l IN LISTS expected)
  string(REGEX MATCH "${name}:${l}:[0-9]+: error: [^\n]*(nodiscard|unused-result)[^\n]*" hit "${out}")
  if(NOT hit)
    list(APPEND missing ${l})
  endif()
endforeach()
set(unexpected "")
foreach(d IN LISTS diags)
  string(REGEX MATCH "^${name}:([0-9]+):" _ "${d}")
  list(FIND expected "${CMAKE_MATCH_1}" idx)
  if(idx EQUAL -1)
    list(APPEND unexpected "${d}")
  endif()
endforeach()

if(rc EQUAL 0)
  message(FATAL_ERROR "${name} compiled without error: forgetting co_await is not diagnosed")
endif()
if(missing OR unexpected)
  string(REPLACE ";" "\n  " unexpected_text "${unexpected}")
  message(FATAL_ERROR "${name}: lines without the expected unused-result error: ${missing}\n"
    "diagnostics on other lines:\n  ${unexpected_text}\n--- compiler output ---\n${out}")
endif()
message(STATUS "${name}: all ${n_expected} forgotten co_awaits are compile errors under -Werror=unused-result")
