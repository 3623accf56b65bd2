# Reward integrity on the host backend (docs/integrity.md): the adversarial submissions
# of tests/adversarial/manifest.yaml (harness: integrity) through the executor's own path
# (ka_exec's worker + a real ka-runner), the physics floor, malformed runner results, and the
# reward of each verdict. Included from tests/CMakeLists.txt.
add_executable(integrity_test ${CMAKE_CURRENT_LIST_DIR}/integrity_test.c
               ${CMAKE_CURRENT_LIST_DIR}/adversarial/manifest.c)
target_include_directories(integrity_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/adversarial)
# the executor's path from its internal library; the reward of each verdict: envserver's
# own code, from its internal library
target_link_libraries(integrity_test PRIVATE ka_exec ka_envserver ${KA_YAML})
add_dependencies(integrity_test ka-runner)
add_test(NAME integrity
         COMMAND integrity_test ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR})
set_tests_properties(integrity PROPERTIES TIMEOUT 300)

# adversarial_list: the manifest as tab-separated lines for the shell harnesses
# (tests/sandbox_faults.sh, tests/device/integrity_h200.sh, tests/device/sandbox_h200.sh)
add_executable(adversarial_list ${CMAKE_CURRENT_LIST_DIR}/adversarial/list.c
               ${CMAKE_CURRENT_LIST_DIR}/adversarial/manifest.c)
target_include_directories(adversarial_list PRIVATE ${CMAKE_CURRENT_LIST_DIR}/adversarial)
target_link_libraries(adversarial_list PRIVATE ka_proto ${KA_YAML})
# the manifest loads, names known statuses and existing files; a broken one is refused
add_test(NAME adversarial_manifest
         COMMAND adversarial_list ${CMAKE_SOURCE_DIR}/tests/adversarial/manifest.yaml none
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(adversarial_manifest PROPERTIES TIMEOUT 30)
add_test(NAME adversarial_manifest_bad
         COMMAND adversarial_list
                 ${CMAKE_SOURCE_DIR}/tests/adversarial/testdata/bad_manifest.yaml none)
set_tests_properties(adversarial_manifest_bad PROPERTIES TIMEOUT 30
                     PASS_REGULAR_EXPRESSION "bad_manifest.yaml:[0-9]+: name twice is used twice")
