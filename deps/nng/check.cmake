# Configure-time check that the nng the build links has the aborted-handshake fix
# (docs/protocol.md, "Aborted handshakes"): nng 1.6.0 or later (upstream's fix), or
# Debian 12's 1.5.2 rebuilt by scripts/install-nng.sh with deps/nng/aborted-handshake.patch,
# whose libnng.a holds the marker string below. Included from CMakeLists.txt after
# KA_NNG (the path of libnng.a) is found. -DKA_NNG_UNFIXED_OK=ON makes a missing fix a
# warning (e.g. to build against the unpatched library and watch handshake_abort fail).
option(KA_NNG_UNFIXED_OK "Build against an nng without the aborted-handshake fix (warn only)" OFF)
find_path(KA_NNG_INCLUDE nng/nng.h REQUIRED)
file(STRINGS ${KA_NNG_INCLUDE}/nng/nng.h _ka_nng_ver
     REGEX "^#define NNG_(MAJOR|MINOR|PATCH)_VERSION[ \t]+[0-9]+")
set(_ka_nng_version "")
foreach(_part MAJOR MINOR PATCH)
  string(REGEX MATCH "NNG_${_part}_VERSION[ \t]+([0-9]+)" _m "${_ka_nng_ver}")
  list(APPEND _ka_nng_version ${CMAKE_MATCH_1})
endforeach()
list(JOIN _ka_nng_version "." _ka_nng_version)
if(_ka_nng_version VERSION_GREATER_EQUAL 1.6.0)
  message(STATUS "kernelarena: nng ${_ka_nng_version}: has the aborted-handshake fix (${KA_NNG})")
else()
  file(STRINGS ${KA_NNG} _ka_nng_marker REGEX "kernelarena-nng-fix:aborted-handshake")
  if(_ka_nng_marker)
    message(STATUS "kernelarena: nng ${_ka_nng_version} with kernelarena's aborted-handshake patch (${KA_NNG})")
  elseif(KA_NNG_UNFIXED_OK)
    message(WARNING "kernelarena: nng ${_ka_nng_version} (${KA_NNG}) lacks the aborted-handshake fix: "
                    "one aborted handshake can stall envserver's ipc endpoints "
                    "(KA_NNG_UNFIXED_OK=ON, so building anyway)")
  else()
    message(FATAL_ERROR "nng ${_ka_nng_version} (${KA_NNG}) lacks the aborted-handshake fix "
                        "(nng issue #1518): one peer that aborts the SP handshake stalls "
                        "envserver's ipc endpoints. Run scripts/install-nng.sh (Debian's nng "
                        "rebuilt with deps/nng/aborted-handshake.patch), or use nng >= 1.6.0; "
                        "-DKA_NNG_UNFIXED_OK=ON builds anyway.")
  endif()
endif()
