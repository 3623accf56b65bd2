# The cuda backend's NVRTC compile-only test (needs NVRTC, no GPU). Included from
# tests/CMakeLists.txt when the ka_backend_cuda target exists.
# Links the backend registry from ka_exec; the test defines a stub ka_backend_host(), so
# the host backend is not linked in.
add_executable(nvrtc_compile_test ${CMAKE_CURRENT_LIST_DIR}/nvrtc_compile_test.c)
# the trusted kernels' embedded header, generated in gpuexec's build folder
target_include_directories(nvrtc_compile_test PRIVATE ${PROJECT_BINARY_DIR}/gpuexec)
target_link_libraries(nvrtc_compile_test PRIVATE ka_exec)
add_dependencies(nvrtc_compile_test ka_backend_cuda ka_trusted_embed)

# argv[1]: the task folder; every cuda/hip task's baseline must compile for sm_90.
add_test(NAME nvrtc_compile COMMAND nvrtc_compile_test ${PROJECT_SOURCE_DIR}/tasks)
set_tests_properties(nvrtc_compile PROPERTIES TIMEOUT 300
  ENVIRONMENT "KA_BACKEND_PATH=$<TARGET_FILE_DIR:ka_backend_cuda>")

# bench/trusted_ops.c: what each device op of the timed phase costs (run on a GPU machine).
# Links the backend registry from ka_exec (a stub ka_backend_host(), as the test above).
add_executable(trusted_ops_bench ${PROJECT_SOURCE_DIR}/bench/trusted_ops.c)
target_link_libraries(trusted_ops_bench PRIVATE ka_exec)
add_dependencies(trusted_ops_bench ka_backend_cuda)

# bench/timer_noise.c: the noise the timer adds to a timed call (run on a GPU machine).
add_executable(timer_noise_bench ${PROJECT_SOURCE_DIR}/bench/timer_noise.c)
target_link_libraries(timer_noise_bench PRIVATE ka_exec m)
add_dependencies(timer_noise_bench ka_backend_cuda)
