# Faults that used to stall or poison the server (issue 14): one ctest entry per fault,
# each against a real envserver (and gpuexec for cleanup) on the host backend, with fake
# executors that can be killed or stopped. tests/reliability_test.py says what each
# checks. Included from tests/CMakeLists.txt; the Python is KA_PYTHON_TEST (server.cmake).
# A full disk, simulated: writes under the state folder fail with ENOSPC on demand.
add_library(ka_test_enospc MODULE ${CMAKE_CURRENT_LIST_DIR}/enospc_shim.c)
target_link_libraries(ka_test_enospc PRIVATE ${CMAKE_DL_LIBS})
foreach(case slow_reader dead_executor dead_server utf8 store_locked close_unrecorded
             store_refused max_episodes inflight_memory cleanup exec_auth enospc close_cancels
             lease_cancels)
  add_test(NAME reliability_${case}
           COMMAND ${KA_PYTHON_TEST} ${CMAKE_CURRENT_LIST_DIR}/reliability_test.py
                   ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR} ${case})
  set_tests_properties(reliability_${case} PROPERTIES TIMEOUT 90 LABELS reliability ENVIRONMENT
                       KA_TEST_ENOSPC_SHIM=$<TARGET_FILE:ka_test_enospc>)
endforeach()
