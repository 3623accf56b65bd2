# `envctl validate`: every host task must pass (one ctest entry per task, so they run in
# parallel and a failure names the task; the test profile: 2 seeds, 3 timed calls, no
# warm-up, on the task's own cases), the broken fixtures in tests/tasks-bad must
# FAIL with the right reasons, and the fixtures in tests/fixtures/validate get the verdicts
# their task.yaml fields call for. Included from tests/CMakeLists.txt.
file(GLOB KA_HOST_TASKS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tasks/host/*/task.yaml)
foreach(yaml ${KA_HOST_TASKS})
  get_filename_component(dir ${yaml} DIRECTORY)
  get_filename_component(name ${dir} NAME)
  add_test(NAME validate_host_${name}
    COMMAND ${CMAKE_BINARY_DIR}/bin/envctl validate --tasks ${PROJECT_SOURCE_DIR}/tasks
            host/${name} --seeds 2 --reps 3 --warmup 0 --quiet)
  set_tests_properties(validate_host_${name} PROPERTIES TIMEOUT 300)
endforeach()

add_test(NAME validate_fixtures
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/validate_test.sh ${CMAKE_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR}
          base)
set_tests_properties(validate_fixtures PROPERTIES TIMEOUT 600)
# per-output tolerances, `nondeterministic` and TASK arguments outside --tasks
# (tests/fixtures/validate)
add_test(NAME validate_fixtures_fields
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/validate_test.sh ${CMAKE_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR}
          fields)
set_tests_properties(validate_fixtures_fields PROPERTIES TIMEOUT 600)
