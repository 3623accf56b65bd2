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
