# Writes the first example of a header's opening comment (the first run of lines indented as code,
# "//     ...", up to a blank comment line) to a file, without the comment prefix, so a test can
# compile and run the example exactly as the header shows it. A line of the example that starts
# with "..." stands for elided code and becomes a comment.
# cmake -DIN=header.hpp -DOUT=example.inc -P extract_example.cmake
file(STRINGS ${IN} lines)
set(out "// Generated from ${IN} by tests/extract_example.cmake. Do not edit.\n")
set(in_block FALSE)
foreach(line IN LISTS lines)
  if(line MATCHES "^//     (.*)$")
    set(in_block TRUE)
    set(code "${CMAKE_MATCH_1}")
    if(code MATCHES "^ *\\.\\.\\.")
      set(code "// ${code}")
    endif()
    string(APPEND out "${code}\n")
  elseif(in_block)
    break()
  endif()
endforeach()
if(NOT in_block)
  message(FATAL_ERROR "no example found in ${IN}")
endif()
file(WRITE ${OUT}.tmp "${out}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
