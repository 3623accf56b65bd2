# Test lanes (HACKING.md "Lanes"), included last by tests/CMakeLists.txt, so that it sees
# every test of this folder (the fuzz targets' fuzz_short is in fuzz/, its own lane).
#
#   fast      unit and protocol tests and one short host episode: the day-to-day lane,
#             under 60 s on a 2-core machine with `ctest -L fast -j4` (two slots per core)
#   full      every test (also those of the fast and format lanes)
#   sanitize  the fast lane, labelled so only in a build with -DKA_SANITIZER=... (the
#             sanitize build folder, scripts/test.sh sanitize), with LeakSanitizer on and
#             the first UBSan report fatal
#   format    clang-format --dry-run --Werror over the C sources (tests/format_check.sh)
#             and no include cycle within a folder (tests/include_cycles.sh)
#
# A test not named in KA_TIMING_TESTS (or KA_NO_PROFILE_TESTS) runs under the test profile: its evaluations make
# KA_JOB_REPS timed calls per case and KA_JOB_WARMUP warm-up calls (read by envserver,
# envserver/jobs.c) instead of 20 and 3. Its assertions are about verdicts, not speed.
# Tests in KA_TIMING_TESTS measure speed: full counts (KA_TIMING_PROFILE_ENV's lighter
# ones when also named in KA_TIMING_PROFILE_TESTS), and RUN_SERIAL (ctest -j runs nothing
# beside them).
#
# A new test: add it with add_test and a TIMEOUT as usual; it lands in `full` under the
# profile. Name it in KA_FAST_TESTS when it is a unit or protocol test of a few seconds
# (the whole lane stays under 60 s); in KA_TIMING_TESTS when it asserts a timing ratio.

set(KA_FAST_TESTS
    common common_base sandbox adversarial_manifest adversarial_manifest_bad server_protocol
    client_kaclient nvrtc_compile hip_compile load_small compare e2e_embedded tasks_dir devlock runner_seeds
    runner_stats
    python_text triton_reset triton_tasks instruction_tasks torch_tasks torchproc command_task tls_url
    prefetch_queue
    triton_driver)
set(KA_TIMING_TESTS e2e_speedup agents_experiment)
# tests under the profile that assert that something ends within a fixed time, and run
# alone too (RUN_SERIAL): prefetch_e2e's prefetch within its agent's 1 s pause (it failed
# at ctest -j4 beside the heavy tests of a loaded machine: 1.1 s of references)
set(KA_ALONE_TESTS prefetch_e2e)
# timing tests with a lighter count than the full 20 + 3: agents_experiment's verdict
# rests on a 2x difference between its two agents' kernels; 10 timed calls keep its noise
# well below that (3 did not: sd 0.85 of log speedup on a loaded machine), and its 20
# episodes at the full count took over 7 minutes on the loaded 2-core machine
set(KA_TIMING_PROFILE_TESTS agents_experiment)
set(KA_TIMING_PROFILE_ENV KA_JOB_REPS=10 KA_JOB_WARMUP=1)
# tests that play the executor themselves and assert the default counts of a Job
set(KA_NO_PROFILE_TESTS server_protocol client_kaclient)
set(KA_PROFILE_ENV KA_JOB_REPS=3 KA_JOB_WARMUP=0)
# CPU-heavy tests: they keep a core busy for most of their run (8 s of CPU or more, at
# three quarters of a core or more when run two at a time: docs/benchmarks/
# 2026-12-02-ci-time.md), and each takes two of ctest's slots (PROCESSORS 2; every
# validate_host_* test too, as envctl validate runs its evaluations back to back).
# scripts/test.sh runs ctest -j with two slots per core, so that two heavy tests share
# the 2-core machine as they did at -j2, and tests that mostly wait (deadlines, heartbeat
# timeouts, restarts: most reliability_*, dispatch, agents_*, server_protocol) fill the
# remaining slots. A plain `ctest -jN` counts slots the same way.
set(KA_HEAVY_TESTS
    sandbox_faults triton_baselines torch_cuda_emu reference_split python_faults_openenv
    concurrency integrity validate_fixtures_fields validate_fixtures python_client heartbeat
    report_render python_wheel python_faults_vector hip_compile nvrtc_compile
    python_faults_verifiers)
# Seconds each long test took in a run of the full lane two at a time on the 2-core
# machine (2026-12-02, docs/benchmarks/2026-12-02-ci-time.md; the machine shared with
# other builds): ctest -j starts the costliest first (a fresh build folder has no
# Testing/ cost data yet), so that no long test is left to run alone at the end. The
# timing tests (RUN_SERIAL) come first of all: started while nothing else runs, they
# wait for no running test to end, and leave no slot idle while they wait.
set(KA_TEST_COSTS
    agents_experiment 1000 e2e_speedup 999 prefetch_e2e 998
    sandbox_faults 40 triton_baselines 30 torch_cuda_emu 29 reference_split 26
    python_faults_verifiers 40 python_faults_openenv 23 reliability_cleanup 22 concurrency 21
    integrity 21
    validate_fixtures_fields 20 e2e_host 19 netns 20 agents_run 18 python_faults_trl 17
    python_client 17 python_faults_skyrl 16 heartbeat 16 compile_deadline 16
    command_tasks 16 triton_faults 16 validate_fixtures 15 hip_compile 15 report_render 15
    validate_host_silu_mul 14 python_wheel 14 dispatch 14 validate_host_softmax 14
    validate_host_prefix_scan 13 agents_command 13 agents_timeout 13
    reliability_slow_reader 13 validate_host_rmsnorm 12 validate_host_histogram 12
    validate_host_transpose 12 python_faults_text 11 validate_host_layernorm 11
    server_protocol 10 format 10 triton_candidates 9 python_faults_skyrl_restart 9
    install 9 python_faults_components 9 validate_host_gelu 9 handshake_abort 9 tls 8
    agents_mcp 8 reliability_close_unrecorded 8 validate_host_conv2d_3x3 8 nvrtc_compile 8
    reliability_dead_executor 8 python_faults_restart 8 python_faults_vector 8 agents_cursor 8
    reliability_dead_server 8 agents_replay 8 hip_select 8 python_faults_reproducible 7
    validate_host_matmul_f32 7 reliability_lease_cancels 7 client_kaclient 7
    validate_host_row_sum 6 reliability_store_locked 6 python_faults_tls 6 agents_claude 6
    e2e_embedded 4 python_faults_connect 4)

# The programs the fast lane's tests run (besides scripts and Python): the sanitize build
# folder builds only these (scripts/test.sh: cmake --build build-asan --target
# ka_fast_lane), not the benchmarks and the full lane's own test programs. A fast test
# that runs a program of its own names it here (else the sanitize lane fails: not found).
set(KA_FAST_TARGETS
    envserver gpuexec ka-runner ka-validate envctl ka_backend_cuda ka_backend_hip
    adversarial_list common_test devlock_test torchproc_test runner_seeds_test runner_stats_test
    command_task_test tls_url_test sandbox_test nvrtc_compile_test hip_compile_test
    server_protocol_test client_kaclient_test triton_reset_test prefetch_test)
add_custom_target(ka_fast_lane)
foreach(tg ${KA_FAST_TARGETS})
  if(TARGET ${tg})
    add_dependencies(ka_fast_lane ${tg})
  endif()
endforeach()

# The format check: every C source and header in the tree against the root .clang-format.
find_program(KA_CLANG_FORMAT NAMES clang-format clang-format-14)
add_test(NAME format COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/format_check.sh ${CMAKE_SOURCE_DIR}
                             ${KA_CLANG_FORMAT})
set_tests_properties(format PROPERTIES TIMEOUT 120 LABELS format)
# No include cycle among the C files of one folder (tests/include_cycles.sh), and the
# check itself fails on the cycle planted in tests/fixtures/include_cycle.
add_test(NAME include_cycles COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/include_cycles.sh
                                     ${CMAKE_SOURCE_DIR})
# (it must exit 1 and name the cycle, a.h -> b.h -> c.h -> a.h)
add_test(NAME include_cycles_planted
         COMMAND sh -c "out=$(\"$0\" \"$1\" tests/fixtures/include_cycle); rc=$?; echo \"$out\"; \
[ $rc -eq 1 ] && echo \"$out\" | grep -qF 'include_cycle: a.h -> b.h -> c.h -> a.h'"
                 ${CMAKE_CURRENT_SOURCE_DIR}/include_cycles.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(include_cycles include_cycles_planted PROPERTIES TIMEOUT 60 LABELS format)

get_property(ka_all_tests DIRECTORY PROPERTY TESTS)
set(ka_costs ${KA_TEST_COSTS})
while(ka_costs)
  list(POP_FRONT ka_costs ka_name ka_cost)
  if(ka_name IN_LIST ka_all_tests)
    set_tests_properties(${ka_name} PROPERTIES COST ${ka_cost})
  endif()
endwhile()
foreach(t ${ka_all_tests})
  set_property(TEST ${t} APPEND PROPERTY LABELS full)
  if(t IN_LIST KA_FAST_TESTS)
    set_property(TEST ${t} APPEND PROPERTY LABELS fast)
    if(KA_SANITIZER)
      set_property(TEST ${t} APPEND PROPERTY LABELS sanitize)
    endif()
  endif()
  if(t IN_LIST KA_TIMING_TESTS OR t IN_LIST KA_ALONE_TESTS)
    set_tests_properties(${t} PROPERTIES RUN_SERIAL TRUE)
  endif()
  if(t IN_LIST KA_HEAVY_TESTS OR t MATCHES "^validate_host_")
    set_tests_properties(${t} PROPERTIES PROCESSORS 2)
  endif()
  if(t IN_LIST KA_TIMING_PROFILE_TESTS)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${KA_TIMING_PROFILE_ENV})
  elseif(NOT (t IN_LIST KA_TIMING_TESTS OR t IN_LIST KA_NO_PROFILE_TESTS))
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${KA_PROFILE_ENV})
  endif()
  if(KA_SANITIZER)
    # leaks are errors (LSan is on by default with ASan on x86_64; said here so that no
    # inherited ASAN_OPTIONS turns it off); the first UBSan report ends the process
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
                 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86
                 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
  endif()
endforeach()
