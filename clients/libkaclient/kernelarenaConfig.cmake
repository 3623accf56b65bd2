# find_package(kernelarena) for an installed kernelarena (`cmake --install`): defines the
# imported target kernelarena::kaclient (the C client, clients/libkaclient/kaclient.h,
# with its protocol library and the system libraries it needs: protobuf-c, nng,
# mbedtls). Located from this file's folder (PREFIX/lib/cmake/kernelarena), so a moved
# prefix still works. Usage:
#   find_package(kernelarena REQUIRED)
#   target_link_libraries(app PRIVATE kernelarena::kaclient)
get_filename_component(_ka_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
find_package(Threads REQUIRED)
find_library(_ka_protobuf_c NAMES protobuf-c)
find_library(_ka_nng NAMES nng)
find_library(_ka_mbedtls NAMES mbedtls)
find_library(_ka_mbedx509 NAMES mbedx509)
find_library(_ka_mbedcrypto NAMES mbedcrypto)
foreach(_ka_lib _ka_protobuf_c _ka_nng _ka_mbedtls _ka_mbedx509 _ka_mbedcrypto)
  if(NOT ${_ka_lib})
    set(kernelarena_FOUND FALSE)
    set(kernelarena_NOT_FOUND_MESSAGE "kernelarena needs ${_ka_lib} (apt: libprotobuf-c-dev libnng-dev libmbedtls-dev)")
    return()
  endif()
endforeach()
if(NOT TARGET kernelarena::ka_proto)
  add_library(kernelarena::ka_proto STATIC IMPORTED)
  set_target_properties(kernelarena::ka_proto PROPERTIES
    IMPORTED_LOCATION "${_ka_prefix}/lib/libka_proto.a"
    INTERFACE_LINK_LIBRARIES "${_ka_protobuf_c}")
  add_library(kernelarena::kaclient STATIC IMPORTED)
  set_target_properties(kernelarena::kaclient PROPERTIES
    IMPORTED_LOCATION "${_ka_prefix}/lib/libkaclient.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_ka_prefix}/include/kernelarena"
    INTERFACE_LINK_LIBRARIES
      "kernelarena::ka_proto;${_ka_nng};${_ka_mbedtls};${_ka_mbedx509};${_ka_mbedcrypto};Threads::Threads")
endif()
set(kernelarena_FOUND TRUE)
