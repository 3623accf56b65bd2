# Faults that used to stall or poison the server (issue 14): one ctest entry per fault,
# each against a real envserver (and gpuexec for cleanup) on the host backend, with fake
# executors that can be killed or stopped. tests/reliability_test.py says what each
# checks. Included from tests/CMakeLists.txt; the Python is KA_PYTHON_TEST (server.cmake).
foreach(case slow_reader dead_executor dead_server utf8 store_locked close_unrecorded
             store_refused max_episodes inflight_memory cleanup exec_auth)
  add_test(NAME reliability_${case}
           COMMAND ${KA_PYTHON_TEST} ${CMAKE_CURRENT_LIST_DIR}/reliability_test.py
                   ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR} ${case})
  set_tests_properties(reliability_${case} PROPERTIES TIMEOUT 90 LABELS reliability)
endforeach()
