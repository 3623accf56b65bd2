# The evaluation pipeline (issues 15 and 16) on the host backend: a compile that never
# finishes is the candidate's COMPILE_ERROR (the runner's compile deadline).
add_test(NAME compile_deadline
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/compile_deadline.sh ${CMAKE_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR})
set_tests_properties(compile_deadline PROPERTIES TIMEOUT 240 LABELS "full")
# A runner killed from outside before its deadline: INFRA_ERROR, never a score.
add_test(NAME outside_kill
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/outside_kill.sh ${CMAKE_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR})
set_tests_properties(outside_kill PROPERTIES TIMEOUT 240)
