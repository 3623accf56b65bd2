# The hip backend's tests (no AMD GPU needed). Included from tests/CMakeLists.txt when
# the ka_backend_hip target exists. Both link the backend registry from ka_exec
# (gpuexec/backends/backend.c) and define a stub ka_backend_host(), so the host backend
# is not linked in.
add_executable(hip_compile_test ${CMAKE_CURRENT_LIST_DIR}/hip_compile_test.c)
target_link_libraries(hip_compile_test PRIVATE ka_exec)
add_dependencies(hip_compile_test ka_backend_hip)

# argv[1]: the task folder; every hip task's baseline must compile with hiprtc for
# gfx90a (or a target the installed ROCm lists).
add_test(NAME hip_compile COMMAND hip_compile_test ${PROJECT_SOURCE_DIR}/tasks)
set_tests_properties(hip_compile PROPERTIES TIMEOUT 300
  ENVIRONMENT "KA_BACKEND_PATH=$<TARGET_FILE_DIR:ka_backend_hip>")

# Backend selection with the host, cuda and hip backends all present: module loading,
# ka-runner --discover per backend, the backends each task accepts, and envctl episodes
# through the embedded envserver + gpuexec --backends auto.
if(TARGET ka_backend_cuda)
  add_executable(hip_select_test ${CMAKE_CURRENT_LIST_DIR}/hip_select_test.c)
  target_link_libraries(hip_select_test PRIVATE ka_exec)
  add_dependencies(hip_select_test ka_backend_hip ka_backend_cuda ka-runner gpuexec envserver
                   envctl)
  add_test(NAME hip_select COMMAND hip_select_test $<TARGET_FILE_DIR:ka_backend_hip>
                                   ${PROJECT_SOURCE_DIR}/tasks)
  set_tests_properties(hip_select PROPERTIES TIMEOUT 600)
endif()
