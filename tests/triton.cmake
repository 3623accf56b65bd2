# The Triton compile path (gpuexec/backends/triton.h) on this machine, without a GPU:
# tests/triton_compile_test.c. Included from tests/CMakeLists.txt with cuda.cmake (the
# bundle check goes through the cuda backend module). The Python with triton is the
# venv's (scripts/install-python-deps.sh); the test fails, naming it, when triton is absent.
add_executable(triton_compile_test ${CMAKE_CURRENT_LIST_DIR}/triton_compile_test.c
               ${CMAKE_CURRENT_LIST_DIR}/adversarial/manifest.c)
target_include_directories(triton_compile_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/adversarial)
target_link_libraries(triton_compile_test PRIVATE ka_exec ${KA_YAML})
add_dependencies(triton_compile_test ka_backend_cuda)
set(KA_TRITON_TEST_ENV "KA_TRITON_PYTHON=${PROJECT_SOURCE_DIR}/.venv/bin/python3"
    "KA_BACKEND_PATH=$<TARGET_FILE_DIR:ka_backend_cuda>")
add_test(NAME triton_baselines COMMAND triton_compile_test baselines ${PROJECT_SOURCE_DIR}/tasks)
add_test(NAME triton_faults COMMAND triton_compile_test faults ${PROJECT_SOURCE_DIR}/tasks)
# the faster candidates (tests/candidates/triton/FAMILY/NAME/) that tests/device/triton_h200.sh
# scores on the H200: each builds here as its task's baseline does
add_test(NAME triton_candidates COMMAND triton_compile_test candidates ${PROJECT_SOURCE_DIR}/tasks
         ${CMAKE_CURRENT_LIST_DIR}/candidates/triton)
# the manifest's compile-time refusals of language triton (harness triton_compile)
add_test(NAME triton_adversarial COMMAND triton_compile_test adversarial ${PROJECT_SOURCE_DIR}/tasks
         ${PROJECT_SOURCE_DIR})
set_tests_properties(triton_baselines triton_faults triton_candidates triton_adversarial
                     PROPERTIES TIMEOUT 120
                     ENVIRONMENT "${KA_TRITON_TEST_ENV}")
# the driver's own guards (its audit hook's task-folder refusal, the kernel-body check), in
# Python without triton
add_test(NAME triton_driver COMMAND ${PROJECT_SOURCE_DIR}/.venv/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/triton_driver_test.py
         ${PROJECT_SOURCE_DIR}/gpuexec/backends/triton_compile.py ${PROJECT_SOURCE_DIR}/tasks)
set_tests_properties(triton_driver PROPERTIES TIMEOUT 30)
