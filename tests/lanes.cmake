# Test lanes (HACKING.md "Lanes"), included last by tests/CMakeLists.txt, so that it sees
# every test of this folder (the fuzz targets' fuzz_short is in fuzz/, its own lane).
#
#   fast      unit and protocol tests and one short host episode: the day-to-day lane,
#             under 60 s on a 2-core machine with `ctest -L fast -j2`
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
    common sandbox adversarial_manifest adversarial_manifest_bad server_protocol
    client_kaclient nvrtc_compile hip_compile load_small compare e2e_embedded tasks_dir devlock runner_seeds
    python_text triton_reset triton_tasks instruction_tasks torch_tasks torchproc command_task tls_url
    prefetch_queue
    triton_driver)
set(KA_TIMING_TESTS e2e_speedup agents_experiment)
# timing tests with a lighter count than the full 20 + 3: agents_experiment's verdict
# rests on a 2x difference between its two agents' kernels; 10 timed calls keep its noise
# well below that (3 did not: sd 0.85 of log speedup on a loaded machine), and its 20
# episodes at the full count took over 7 minutes on the loaded 2-core machine
set(KA_TIMING_PROFILE_TESTS agents_experiment)
set(KA_TIMING_PROFILE_ENV KA_JOB_REPS=10 KA_JOB_WARMUP=1)
# tests that play the executor themselves and assert the default counts of a Job
set(KA_NO_PROFILE_TESTS server_protocol client_kaclient)
set(KA_PROFILE_ENV KA_JOB_REPS=3 KA_JOB_WARMUP=0)
# Seconds each long test took in a ctest -j2 run of the full lane on the 2-core machine
# (session 13, after the host backend's cache flush was cut to 64 MiB; integrity and
# python_client as they take under load): ctest -j starts the costliest first (a fresh
# build folder has no Testing/ cost data yet), so that no long test is left to run
# alone at the end.
set(KA_TEST_COSTS
    integrity 60 sandbox_faults 45 python_client 40 validate_fixtures_fields 34 agents_run 30
    validate_fixtures 25 reliability_cleanup 22 concurrency 21 e2e_host 19 heartbeat 17
    python_faults_restart 17 compile_deadline 17 python_faults_vector 16
    validate_host_row_sum 15 agents_command 14 report_render 14 validate_host_gelu 14
    agents_timeout 13 reliability_slow_reader 13 validate_host_layernorm 12
    validate_host_transpose 10 agents_mcp 10 agents_claude 9 agents_replay 9
    validate_host_rmsnorm 9 validate_host_silu_mul 9 handshake_abort 8
    install 12 python_faults_reproducible 20 triton_faults 10 triton_baselines 27
    triton_candidates 6 reference_split 20
    command_tasks 24 python_faults_openenv 35 python_faults_trl 32 python_faults_skyrl_restart 8
    python_wheel 41 tls 15 netns 55 dispatch 14 deploy_lint 8 torch_cuda_emu 30
    python_faults_tls 12 prefetch_e2e 9 python_faults_connect 6)

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
  if(t IN_LIST KA_TIMING_TESTS)
    set_tests_properties(${t} PROPERTIES RUN_SERIAL TRUE)
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
