# envserver protocol test: starts the real envserver on a temporary state folder with
# the repository's tasks, plays a client and a fake host executor, and checks the
# replies, the workspace and the trace store. Included from tests/CMakeLists.txt.
add_executable(server_protocol_test ${CMAKE_CURRENT_LIST_DIR}/server_protocol_test.c)
target_link_libraries(server_protocol_test PRIVATE ka_common ka_proto ${KA_NNG_LIBS}
                      ${KA_SQLITE} m ${CMAKE_DL_LIBS})
add_dependencies(server_protocol_test envserver)
add_test(NAME server_protocol
         COMMAND server_protocol_test $<TARGET_FILE:envserver> ${CMAKE_SOURCE_DIR}/tasks)
set_tests_properties(server_protocol PROPERTIES TIMEOUT 120)

# libkaclient against the real envserver (this test plays the executor).
add_executable(client_kaclient_test ${CMAKE_CURRENT_LIST_DIR}/client_kaclient_test.c)
target_link_libraries(client_kaclient_test PRIVATE kaclient ka_common)
add_dependencies(client_kaclient_test envserver)
add_test(NAME client_kaclient
         COMMAND client_kaclient_test $<TARGET_FILE:envserver> ${CMAKE_SOURCE_DIR}/tasks)
set_tests_properties(client_kaclient PROPERTIES TIMEOUT 120)

# The Python package against a real envserver + gpuexec (host backend): Client, Env under
# gymnasium's env checker, the async batch interface, evaluate(), envctl export/replay.
# Python with protobuf, pynng and gymnasium: KA_PYTHON, else the venv that
# scripts/install-python-deps.sh makes (.venv), else python3.
if(KA_PYTHON)
  set(KA_PYTHON_TEST ${KA_PYTHON})
elseif(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python3)
  set(KA_PYTHON_TEST ${CMAKE_SOURCE_DIR}/.venv/bin/python3)
else()
  find_program(KA_PYTHON3 python3)
  set(KA_PYTHON_TEST ${KA_PYTHON3})
endif()
add_test(NAME python_client
         COMMAND ${KA_PYTHON_TEST} ${CMAKE_CURRENT_LIST_DIR}/python_client_test.py
                 ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR})
set_tests_properties(python_client PROPERTIES TIMEOUT 400)

# examples/grpo_step.py (the shape of one GRPO step) against a real server, host backend.
add_test(NAME python_grpo_example
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/python_grpo_example.sh ${CMAKE_BINARY_DIR}/bin
                 ${CMAKE_SOURCE_DIR} ${KA_PYTHON_TEST})
set_tests_properties(python_grpo_example PROPERTIES TIMEOUT 400)

# A triton task needs an executor whose device lists language triton (fake executors).
add_executable(triton_reset_test ${CMAKE_CURRENT_LIST_DIR}/triton_reset_test.c)
target_link_libraries(triton_reset_test PRIVATE ka_common ka_proto ${KA_NNG_LIBS} m
                      ${CMAKE_DL_LIBS})
add_dependencies(triton_reset_test envserver)
add_test(NAME triton_reset
         COMMAND triton_reset_test $<TARGET_FILE:envserver> ${CMAKE_SOURCE_DIR}/tasks)
set_tests_properties(triton_reset PROPERTIES TIMEOUT 60)
