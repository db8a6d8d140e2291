# Fuzz targets. Each target is one LLVMFuzzerTestOneInput (tests/<module>/*_fuzzer.cc) with a seed
# corpus in tests/fuzz/corpus/<name>/, built one of two ways:
#  - VEIL_FUZZ=ON (Clang only): a libFuzzer binary, the whole project instrumented for coverage
#    (-fsanitize=fuzzer-no-link, added in the top-level CMakeLists.txt). scripts/fuzz runs the long
#    campaign; ctest runs each for 2,000 executions over its corpus.
#  - otherwise (any compiler, the suite's gcc and ASan builds): the same function linked with
#    tests/fuzz/replay_main.cc, which replays the corpus and deterministic mutations of it, so that
#    every target's corpus runs in every build of the suite.
# New inputs libFuzzer finds go to the build tree, never into the repository's corpus.
option(VEIL_FUZZ "Build the fuzz targets as libFuzzer binaries (Clang)" OFF)
if(VEIL_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "VEIL_FUZZ needs Clang (libFuzzer): configure with CC=clang CXX=clang++")
endif()
set(VEIL_FUZZ_CORPUS_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus)

# veil_fuzzer(NAME SOURCE LIBRARIES...): the target NAME and its ctest NAME.
function(veil_fuzzer name source)
  add_executable(${name} ${source} ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_support.cc)
  target_link_libraries(${name} PRIVATE ${ARGN} absl::strings absl::str_format)
  set(corpus ${VEIL_FUZZ_CORPUS_DIR}/${name})
  if(VEIL_FUZZ)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set(found ${CMAKE_BINARY_DIR}/fuzz/ctest-corpus/${name})
    file(MAKE_DIRECTORY ${found})
    add_test(NAME ${name}
      COMMAND ${name} -runs=2000 -seed=1 -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz/ctest- ${found} ${corpus})
  else()
    target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.cc)
    add_test(NAME ${name} COMMAND ${name} ${corpus})
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS fuzz)
endfunction()
