# Compile SOURCE with the warning for a discarded [[nodiscard]] value made an error, and check that
# the marked lines, and only they, are diagnosed: a line marked `EXPECT-NODISCARD` must get an
# unused-result error, a line marked `EXPECT-PRIVATE` an access error (a private or protected
# member used outside its class), and no other line of SOURCE may get any error or warning.
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
# What each mark asks of the compiler (GCC: "is private within this context"; clang: "calling a
# private constructor", "'x' is a private member").
set(kinds NODISCARD PRIVATE)
set(NODISCARD_diagnostic "(nodiscard|unused-result)")
set(NODISCARD_what "forgotten co_awaits are compile errors under -Werror=unused-result")
set(PRIVATE_diagnostic "(private|protected)")
set(PRIVATE_what "forged operations are access errors")
file(STRINGS ${SOURCE} lines)
set(expected "")
set(n 0)
foreach(kind IN LISTS kinds)
  set(${kind}_lines "")
endforeach()
foreach(line IN LISTS lines)
  math(EXPR n "${n} + 1")
  foreach(kind IN LISTS kinds)
    if(line MATCHES "EXPECT-${kind}" AND NOT line MATCHES "^//")
      list(APPEND ${kind}_lines ${n})
      list(APPEND expected ${n})
    endif()
  endforeach()
endforeach()
list(LENGTH expected n_expected)
if(n_expected EQUAL 0)
  message(FATAL_ERROR "${name}: no line is marked EXPECT-NODISCARD or EXPECT-PRIVATE")
endif()

# Every diagnostic of the compiler about this file: "<name>:<line>:<col>: error|warning: ...".
string(REGEX MATCHALL "${name}:[0-9]+:[0-9]+: (error|warning): [^\n]*" diags "${out}")
set(missing "")
foreach(kind IN LISTS kinds)
  foreach(l IN LISTS ${kind}_lines)
    string(REGEX MATCH "${name}:${l}:[0-9]+: error: [^\n]*${${kind}_diagnostic}[^\n]*" hit "${out}")
    if(NOT hit)
      list(APPEND missing "${l} (${kind})")
    endif()
  endforeach()
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
  message(FATAL_ERROR "${name} compiled without error: no marked line is diagnosed")
endif()
if(missing OR unexpected)
  string(REPLACE ";" "\n  " unexpected_text "${unexpected}")
  message(FATAL_ERROR "${name}: lines without the expected error: ${missing}\n"
    "diagnostics on other lines:\n  ${unexpected_text}\n--- compiler output ---\n${out}")
endif()
foreach(kind IN LISTS kinds)
  list(LENGTH ${kind}_lines k)
  if(k GREATER 0)
    message(STATUS "${name}: all ${k} ${${kind}_what}")
  endif()
endforeach()
