# Aborted SP handshakes on both envserver endpoints, over ipc:// and tcp://
# (tests/handshake_test.py; docs/protocol.md, "Aborted handshakes"). The system python3
# is enough: the test uses the standard library and build/bin/envctl as its client.
find_program(KA_HANDSHAKE_PYTHON python3 REQUIRED)
add_test(NAME handshake_abort
         COMMAND ${KA_HANDSHAKE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/handshake_test.py
                 ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR})
set_tests_properties(handshake_abort PROPERTIES TIMEOUT 420)
