# The `corral` command starts for every user action, and with the shared gRPC/protobuf/abseil
# libraries (about 60 of them) the dynamic loader's symbol lookups cost ~10 ms per start,
# more than corral's whole job pipeline. Executables that set the target property
# CORRAL_STATIC_RPC link those libraries from their static archives instead; the daemons,
# which start once, keep the shared ones. Falls back to shared when an archive is missing.
option(CORRAL_STATIC_CLIENT "Link the corral command with static gRPC/protobuf/abseil" ON)

add_library(corral_rpc_shared INTERFACE)
target_link_libraries(corral_rpc_shared INTERFACE protobuf::libprotobuf gRPC::grpc++)

function(corral_find_rpc_archives out)
  # The secure variants: TLS to corrald and the step managers (net/tls.h) needs them.
  set(names grpc++ grpc protobuf upb gpr address_sorting cares re2 z)
  set(archives "")
  foreach(name IN LISTS names)
    find_library(CORRAL_ARCHIVE_${name} NAMES lib${name}.a)
    if(NOT CORRAL_ARCHIVE_${name})
      message(STATUS "corral: no lib${name}.a; the corral command links gRPC dynamically")
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
    list(APPEND archives ${CORRAL_ARCHIVE_${name}})
  endforeach()
  get_filename_component(libdir ${CORRAL_ARCHIVE_grpc} DIRECTORY)
  file(GLOB absl ${libdir}/libabsl_*.a)
  list(APPEND archives ${absl})
  set(${out} ${archives} PARENT_SCOPE)
endfunction()

add_library(corral_rpc_static INTERFACE)
set(CORRAL_RPC_ARCHIVES "")
if(CORRAL_STATIC_CLIENT)
  corral_find_rpc_archives(CORRAL_RPC_ARCHIVES)
endif()
if(CORRAL_RPC_ARCHIVES)
  # Headers are the same for both; only what is linked differs. A group because the
  # archives refer to each other in cycles (abseil especially).
  target_include_directories(corral_rpc_static INTERFACE
    $<TARGET_PROPERTY:gRPC::grpc++,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:protobuf::libprotobuf,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(corral_rpc_static INTERFACE
    "-Wl,--start-group" ${CORRAL_RPC_ARCHIVES} "-Wl,--end-group" OpenSSL::SSL OpenSSL::Crypto Threads::Threads dl m rt)
else()
  target_link_libraries(corral_rpc_static INTERFACE corral_rpc_shared)
endif()

# Linked by corral_proto: the head executable's CORRAL_STATIC_RPC property picks the variant.
add_library(corral_rpc INTERFACE)
target_link_libraries(corral_rpc INTERFACE
  $<IF:$<BOOL:$<TARGET_PROPERTY:CORRAL_STATIC_RPC>>,corral_rpc_static,corral_rpc_shared>)
