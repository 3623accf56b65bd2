# The Python client under faults and trainer-style use (issue 18): one ctest entry per
# case of tests/python_faults_test.py (its docstring says what each checks), each against
# a real envserver + gpuexec on the host backend. Included from tests/CMakeLists.txt; the
# Python is KA_PYTHON_TEST (server.cmake).
foreach(case restart pickle connect tls vector components prompts text skyrl skyrl_restart openenv trl reproducible)
  add_test(NAME python_faults_${case}
           COMMAND ${KA_PYTHON_TEST} ${CMAKE_CURRENT_LIST_DIR}/python_faults_test.py
                   ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR} ${case})
  set_tests_properties(python_faults_${case} PROPERTIES TIMEOUT 240 LABELS python)
endforeach()
# The text layer without a server (reply parsing, rendering, reward scaling): fast lane.
add_test(NAME python_text COMMAND ${KA_PYTHON_TEST} ${CMAKE_CURRENT_LIST_DIR}/python_text_test.py
                                  ${CMAKE_SOURCE_DIR})
set_tests_properties(python_text PROPERTIES TIMEOUT 30 LABELS python)
# The wheel with the server programs inside it (scripts/build-wheel.sh), installed into
# a fresh venv: its envctl runs an episode (tests/python_wheel_test.sh).
add_test(NAME python_wheel COMMAND ${CMAKE_CURRENT_LIST_DIR}/python_wheel_test.sh ${CMAKE_BINARY_DIR}
                                   ${CMAKE_SOURCE_DIR} ${KA_PYTHON_TEST})
set_tests_properties(python_wheel PROPERTIES TIMEOUT 240 LABELS python)
# verifiers (lane trainers: its venv, .venv-verifiers, comes from
# scripts/install-python-deps.sh --verifiers or --trainers; verifiers pins mcp==2.0.0,
# .venv has 2.3.0). Not in CI's lanes, which are at their 10 minutes already (with it CI
# took 10 min 47 s, without 8 min 51 s and 10 min 34 s: docs/benchmarks/2026-12-02-ci-time.md). Without that venv the test fails and says how
# to make it.
set(KA_VERIFIERS_PYTHON ${CMAKE_SOURCE_DIR}/.venv-verifiers/bin/python3)
add_test(NAME python_faults_verifiers
         COMMAND sh -c "[ -x \"$0\" ] || { echo \"FAIL - no $0: scripts/install-python-deps.sh --verifiers makes it\"; exit 1; }; exec \"$0\" \"$@\""
                 ${KA_VERIFIERS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/python_faults_test.py
                 ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR} verifiers)
set_tests_properties(python_faults_verifiers PROPERTIES TIMEOUT 400 LABELS "python;trainers")
# NeMo-Gym (lane trainers: .venv-nemo, Python 3.12, from install-python-deps.sh --trainers).
set(KA_NEMO_PYTHON ${CMAKE_SOURCE_DIR}/.venv-nemo/bin/python3)
add_test(NAME python_faults_nemo_gym
         COMMAND sh -c "[ -x \"$0\" ] || { echo \"FAIL - no $0: scripts/install-python-deps.sh --trainers makes it\"; exit 1; }; exec \"$0\" \"$@\""
                 ${KA_NEMO_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/python_faults_test.py
                 ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR} nemo_gym)
set_tests_properties(python_faults_nemo_gym PROPERTIES TIMEOUT 300 LABELS "python;trainers")
# A real TRL GRPOTrainer run (lane trainers: .venv-trl, trl 1.16.0 with torch on the CPU,
# from install-python-deps.sh --trainers; about 6 GiB, so not in CI's venv).
set(KA_TRL_PYTHON ${CMAKE_SOURCE_DIR}/.venv-trl/bin/python3)
add_test(NAME python_faults_trl_grpo
         COMMAND sh -c "[ -x \"$0\" ] || { echo \"FAIL - no $0: scripts/install-python-deps.sh --trainers makes it\"; exit 1; }; exec \"$0\" \"$@\""
                 ${KA_TRL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/python_faults_test.py
                 ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR} trl_grpo)
set_tests_properties(python_faults_trl_grpo PROPERTIES TIMEOUT 400 LABELS "python;trainers"
                     ENVIRONMENT "TRL_EXPERIMENTAL_SILENCE=1")
