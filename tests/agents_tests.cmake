# Agent adapters (docs/agents.md): every adapter against a fake CLI, `envctl mcp` with the
# official MCP Python SDK (installed by scripts/install-python-deps.sh), and `envctl run` with configs, on a real envserver + gpuexec
# (host backend). The fake CLIs are Python scripts.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
foreach(case claude codex cursor command replay timeout)
  add_test(NAME agents_${case}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agents_adapters.sh ${CMAKE_BINARY_DIR}/bin
            ${CMAKE_SOURCE_DIR} ${case})
  set_tests_properties(agents_${case} PROPERTIES TIMEOUT 300)
endforeach()
# (the MCP SDK comes from scripts/install-python-deps.sh, in KA_PYTHON_TEST's environment)
add_test(NAME agents_mcp
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agents_mcp.sh ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR}
          ${KA_PYTHON_TEST})
set_tests_properties(agents_mcp PROPERTIES TIMEOUT 300)
add_test(NAME agents_run
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agents_run.sh ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR})
set_tests_properties(agents_run PROPERTIES TIMEOUT 480)
# Issue 6's "done when" chain: configs/experiment-host-{a,b}.yaml run (A stopped with
# SIGTERM and resumed), compared (verdict better, interval above 0), reported and
# rendered in headless Chromium.
add_test(NAME agents_experiment
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agents_experiment.sh ${CMAKE_BINARY_DIR}/bin
          ${CMAKE_SOURCE_DIR})
set_tests_properties(agents_experiment PROPERTIES TIMEOUT 420)
