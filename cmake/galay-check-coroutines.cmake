# galay_check_coroutines(<target> [RUNNERS name...] [CONDITION_MACROS name...]): a build step that
# checks the C++ sources of <target> for the coroutine forms g++ 12 miscompiles (co_await in a
# condition, an aggregate temporary in a co_await statement, a capturing lambda coroutine called
# on the spot whose task outlives it; docs/guide/compilers.md). The target is built only once its
# sources pass; each finding is printed as `file:line: <form>: <the safe form>`. The types the
# sources include from the target's include directories (galay's headers among them) are read
# to learn which are aggregates.
#   RUNNERS: functions of yours that run a task to its end before they return (like block_on),
#            so a capturing lambda coroutine passed to them is fine.
#   CONDITION_MACROS: macros of yours whose argument ends up in an `if` (assert and GoogleTest's
#            EXPECT_*/ASSERT_* are known).
# Needs Python 3 (its standard library only). The script itself, for use by hand:
# check_coroutines.py next to this file in a source tree, <prefix>/share/galay-kernel/ installed.
if(NOT DEFINED GALAY_CHECK_COROUTINES_SCRIPT)
  set(GALAY_CHECK_COROUTINES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/check_coroutines.py")
endif()
# Global: the function may be called from any directory of the project.
set_property(GLOBAL PROPERTY GALAY_CHECK_COROUTINES_SCRIPT "${GALAY_CHECK_COROUTINES_SCRIPT}")

function(galay_check_coroutines target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "RUNNERS;CONDITION_MACROS")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "galay_check_coroutines: ${target} is not a target")
  endif()
  get_property(script GLOBAL PROPERTY GALAY_CHECK_COROUTINES_SCRIPT)
  if(NOT EXISTS "${script}")
    message(FATAL_ERROR "galay_check_coroutines: the checker is missing: ${script}")
  endif()
  find_package(Python3 COMPONENTS Interpreter)
  if(NOT Python3_Interpreter_FOUND)
    message(FATAL_ERROR "galay_check_coroutines(${target}): needs a Python 3 interpreter")
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(files)
  foreach(src IN LISTS sources)
    if(src MATCHES "\\$<" OR NOT src MATCHES "\\.(c|cc|cpp|cxx|c\\+\\+|h|hh|hpp|hxx|ipp|tpp|inl)$")
      continue() # generator expressions, objects, other languages
    endif()
    if(NOT IS_ABSOLUTE "${src}")
      set(src "${source_dir}/${src}")
    endif()
    list(APPEND files "${src}")
  endforeach()
  if(NOT files)
    message(FATAL_ERROR "galay_check_coroutines: ${target} has no C++ source to check")
  endif()
  set(options)
  foreach(name IN LISTS ARG_RUNNERS)
    list(APPEND options --runner ${name})
  endforeach()
  foreach(name IN LISTS ARG_CONDITION_MACROS)
    list(APPEND options --condition-macro ${name})
  endforeach()
  set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(stamp "${CMAKE_CURRENT_BINARY_DIR}/${target}.coroutines-checked")
  add_custom_command(OUTPUT "${stamp}"
    COMMAND Python3::Interpreter "${script}" --stamp "${stamp}" ${options}
            "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>" ${files}
    DEPENDS ${files} "${script}"
    COMMENT "Checking ${target} for coroutine forms g++ 12 miscompiles"
    COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(${target}_coroutine_check DEPENDS "${stamp}")
  add_dependencies(${target} ${target}_coroutine_check)
endfunction()
