# The hip backend module (ka_backend_hip.so). Included from gpuexec/CMakeLists.txt.
# Built against the HIP and rocm-smi headers only (Debian 12: libamdhip64-dev,
# librocm-smi-dev; or a ROCm install under $ROCM_PATH or /opt/rocm); it dlopens
# libamdhip64, hiprtc, comgr and librocm_smi64 at run time. Without the headers the
# module is skipped and everything else builds as before.
option(KA_BUILD_HIP "Build the hip backend module (needs the HIP and rocm-smi headers)" ON)
find_path(KA_HIP_INCLUDE hip/hiprtc.h HINTS $ENV{ROCM_PATH}/include /opt/rocm/include)
find_path(KA_RSMI_INCLUDE rocm_smi/rocm_smi.h HINTS $ENV{ROCM_PATH}/include /opt/rocm/include)
if(KA_BUILD_HIP AND KA_HIP_INCLUDE AND KA_RSMI_INCLUDE)
  add_library(ka_backend_hip MODULE ${CMAKE_CURRENT_LIST_DIR}/backend_hip.c)
  set_target_properties(ka_backend_hip PROPERTIES PREFIX "" C_VISIBILITY_PRESET hidden)
  # export only ka_backend_get, not the static libraries linked in
  target_link_options(ka_backend_hip PRIVATE -Wl,--exclude-libs,ALL)
  # the headers' host-side declarations; no device code is compiled here
  target_compile_definitions(ka_backend_hip PRIVATE __HIP_PLATFORM_AMD__=1)
  target_include_directories(ka_backend_hip PRIVATE ${KA_HIP_INCLUDE} ${KA_RSMI_INCLUDE}
                             ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(ka_backend_hip PRIVATE ka_common ${CMAKE_DL_LIBS} Threads::Threads)
  add_dependencies(ka-runner ka_backend_hip)
  message(STATUS "kernelarena: hip backend module enabled (${KA_HIP_INCLUDE})")
else()
  message(STATUS "kernelarena: hip backend module disabled (KA_BUILD_HIP=${KA_BUILD_HIP}; "
                 "headers: ${KA_HIP_INCLUDE}, ${KA_RSMI_INCLUDE}; scripts/install-deps.sh "
                 "installs them)")
endif()
