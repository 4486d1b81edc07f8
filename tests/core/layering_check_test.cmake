# The layering check of core/ (core/check_layers.cmake) must fail, naming the
# file and the include, when a layer includes a layer above it, and pass when
# it includes only those below. Run by ctest:
#   cmake -DCHECK=core/check_layers.cmake -DWORK=<scratch dir> -P layering_check_test.cmake
file(REMOVE_RECURSE ${WORK})
file(WRITE ${WORK}/layers.txt "low=hpu/core/low/\nhigh=hpu/core/high/,hpu/core/low/\n")
file(WRITE ${WORK}/core/high/include/hpu/core/high/h.h "#include \"hpu/core/low/l.h\"\n")
file(WRITE ${WORK}/core/low/include/hpu/core/low/l.h "#pragma once\n#include <vector>\n")

execute_process(COMMAND ${CMAKE_COMMAND} -DCORE_DIR=${WORK}/core -DLAYERS=${WORK}/layers.txt -P ${CHECK}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "a downward include was refused:\n${err}")
endif()

file(WRITE ${WORK}/core/low/src/l.cc "#include \"hpu/core/low/l.h\"\n#include \"hpu/core/high/h.h\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DCORE_DIR=${WORK}/core -DLAYERS=${WORK}/layers.txt -P ${CHECK}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " err "${err}")
set(expected "core/low/src/l.cc: includes hpu/core/high/h.h, above the low layer (it may include: low/)")
if(result EQUAL 0)
  message(FATAL_ERROR "an upward include passed the check")
endif()
string(FIND "${err}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the check did not name the include; expected\n  ${expected}\ngot\n  ${err}")
endif()
file(REMOVE_RECURSE ${WORK})
message(STATUS "upward include refused: ${expected}")
