# A streamed fit against the in-memory one on the same file: writes the data (GENERATOR with GEN_ARGS),
# runs PROGRAM with ARGS writing LABELS_A, then with ARGS and STREAM_ARGS writing LABELS_B; the label
# files must be equal byte for byte, and the streamed run's stdout must match EXPECT. Exit 77 (no CUDA
# device) prints SKIPPED, which CTest reports as skipped.
execute_process(COMMAND ${GENERATOR} ${GEN_ARGS} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GENERATOR} failed (${rc}): ${err}")
endif()
file(REMOVE "${LABELS_A}" "${LABELS_B}")
execute_process(COMMAND ${PROGRAM} ${ARGS} --output-labels ${LABELS_A} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(rc EQUAL 77)
  message("SKIPPED: ${err}")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "in-memory run: exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(out MATCHES "streamed from")
  message(FATAL_ERROR "the in-memory run streamed:\n${out}")
endif()
execute_process(COMMAND ${PROGRAM} ${ARGS} ${STREAM_ARGS} --output-labels ${LABELS_B} RESULT_VARIABLE rc
                OUTPUT_VARIABLE streamed ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "streamed run: exit ${rc}\nstdout:\n${streamed}\nstderr:\n${err}")
endif()
if(NOT streamed MATCHES "${EXPECT}")
  message(FATAL_ERROR "streamed run's stdout does not match '${EXPECT}':\n${streamed}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${LABELS_A}" "${LABELS_B}" RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "the streamed labels (${LABELS_B}) differ from the in-memory ones (${LABELS_A})\n"
                      "in memory:\n${out}\nstreamed:\n${streamed}")
endif()
message(STATUS "in memory:\n${out}\nstreamed:\n${streamed}")
