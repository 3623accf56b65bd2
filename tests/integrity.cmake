# Reward integrity on the host backend (docs/integrity.md): adversarial candidates
# through the executor's own path (worker.c + a real ka-runner), the physics floor,
# malformed runner results, and the reward of each verdict. Included from
# tests/CMakeLists.txt.
add_executable(integrity_test ${CMAKE_CURRENT_LIST_DIR}/integrity_test.c
               ${PROJECT_SOURCE_DIR}/gpuexec/worker.c ${PROJECT_SOURCE_DIR}/gpuexec/reference.c
               ${PROJECT_SOURCE_DIR}/envserver/reward.c ${PROJECT_SOURCE_DIR}/gpuexec/sandbox.c)
target_include_directories(integrity_test PRIVATE ${PROJECT_SOURCE_DIR}/gpuexec
                           ${PROJECT_SOURCE_DIR}/envserver)
target_link_libraries(integrity_test PRIVATE ka_common ka_proto ${KA_SECCOMP} Threads::Threads
                      ${CMAKE_DL_LIBS} m)
add_dependencies(integrity_test ka-runner)
add_test(NAME integrity
         COMMAND integrity_test ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR})
set_tests_properties(integrity PROPERTIES TIMEOUT 300)
