# The cuda backend's NVRTC compile-only test (needs NVRTC, no GPU). Included from
# tests/CMakeLists.txt when the ka_backend_cuda target exists.
# Builds the backend registry (gpuexec/backend.c) in, but not the host backend: the test
# defines a stub ka_backend_host().
add_executable(nvrtc_compile_test ${CMAKE_CURRENT_LIST_DIR}/nvrtc_compile_test.c
               ${PROJECT_SOURCE_DIR}/gpuexec/backends/backend.c)
target_include_directories(nvrtc_compile_test PRIVATE ${PROJECT_SOURCE_DIR}/gpuexec/backends
                           ${PROJECT_BINARY_DIR}/gpuexec)
target_link_libraries(nvrtc_compile_test PRIVATE ka_common ${CMAKE_DL_LIBS})
add_dependencies(nvrtc_compile_test ka_backend_cuda ka_trusted_embed)

# argv[1]: the task folder; every cuda/hip task's baseline must compile for sm_90.
add_test(NAME nvrtc_compile COMMAND nvrtc_compile_test ${PROJECT_SOURCE_DIR}/tasks)
set_tests_properties(nvrtc_compile PROPERTIES TIMEOUT 300
  ENVIRONMENT "KA_BACKEND_PATH=$<TARGET_FILE_DIR:ka_backend_cuda>")

# bench/trusted_ops.c: what each device op of the timed phase costs (run on a GPU machine).
add_executable(trusted_ops_bench ${PROJECT_SOURCE_DIR}/bench/trusted_ops.c
               ${PROJECT_SOURCE_DIR}/gpuexec/backends/backend.c)
target_include_directories(trusted_ops_bench PRIVATE ${PROJECT_SOURCE_DIR}/gpuexec/backends)
target_link_libraries(trusted_ops_bench PRIVATE ka_common ${CMAKE_DL_LIBS})
add_dependencies(trusted_ops_bench ka_backend_cuda)
