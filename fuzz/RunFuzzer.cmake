# Runs one libFuzzer target for SECONDS from a fresh corpus directory WORK
# seeded with SEEDS (files or directories). Used by the `fuzz.<target>`
# ctest tests (fuzz/CMakeLists.txt) and scripts/fuzz.sh.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
foreach(s ${SEEDS})
  if(IS_DIRECTORY ${s})
    file(GLOB _files ${s}/*)
    foreach(f ${_files})
      file(COPY ${f} DESTINATION ${WORK}/corpus)
    endforeach()
  elseif(EXISTS ${s})
    file(COPY ${s} DESTINATION ${WORK}/corpus)
  endif()
endforeach()
execute_process(
  COMMAND ${FUZZER} ${WORK}/corpus -max_total_time=${SECONDS} -timeout=10
          -rss_limit_mb=4096 -close_fd_mask=1 -print_final_stats=1
          -artifact_prefix=${WORK}/artifacts/
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (exit ${rc}); reproducers in "
                      "${WORK}/artifacts")
endif()
