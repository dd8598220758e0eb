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
    "-Wl,--start-group" ${CORRAL_RPC_ARCHIVES} "-Wl,--end-group" corral_ssl corral_crypto Threads::Threads dl m rt)
else()
  target_link_libraries(corral_rpc_static INTERFACE corral_rpc_shared)
endif()

# Linked by corral_proto: the head executable's CORRAL_STATIC_RPC property picks the variant.
add_library(corral_rpc INTERFACE)
target_link_libraries(corral_rpc INTERFACE
  $<IF:$<BOOL:$<TARGET_PROPERTY:CORRAL_STATIC_RPC>>,corral_rpc_static,corral_rpc_shared>)

# The corral command's other shared libraries (OpenSSL, MUNGE, yaml-cpp) cost the loader
# about 0.8 ms per start (docs/performance.md, "Command start-up"): CORRAL_STATIC_RPC
# executables take their archives too. Libraries link corral_ssl, corral_crypto,
# corral_munge and corral_yaml instead of the packages' targets, so one executable never
# gets both copies.
# corral_static_or_shared(NAME SHARED_TARGET ARCHIVE...): NAME links the archives (in this
# order: an archive before what it needs) into CORRAL_STATIC_RPC executables, else the target.
function(corral_static_or_shared name shared)
  add_library(${name} INTERFACE)
  target_include_directories(${name} INTERFACE $<TARGET_PROPERTY:${shared},INTERFACE_INCLUDE_DIRECTORIES>)
  set(static "$<BOOL:$<TARGET_PROPERTY:CORRAL_STATIC_RPC>>")
  set(archives "")
  foreach(a IN LISTS ARGN)
    find_library(CORRAL_ARCHIVE_${a} NAMES lib${a}.a)
    if(NOT CORRAL_ARCHIVE_${a} OR NOT CORRAL_RPC_ARCHIVES)
      target_link_libraries(${name} INTERFACE ${shared})
      return()
    endif()
    list(APPEND archives "$<${static}:${CORRAL_ARCHIVE_${a}}>")
  endforeach()
  target_link_libraries(${name} INTERFACE ${archives} "$<$<NOT:${static}>:${shared}>" Threads::Threads dl)
endfunction()
corral_static_or_shared(corral_crypto OpenSSL::Crypto crypto)
corral_static_or_shared(corral_ssl OpenSSL::SSL ssl crypto)
corral_static_or_shared(corral_munge PkgConfig::MUNGE munge)
corral_static_or_shared(corral_yaml yaml-cpp yaml-cpp)

# {fmt} and toml++: CORRAL_STATIC_RPC executables build their compiled parts in
# (src/linkage) instead of loading the shared libraries, which would also load libstdc++.so;
# with every C++ library static, libstdc++ and libgcc are linked statically too. The command's
# start-up then loads only libc and libm (docs/performance.md, "Command start-up").
set(corral_static_head "$<BOOL:$<TARGET_PROPERTY:CORRAL_STATIC_RPC>>")
function(corral_compiled_or_shared name shared compiled)
  add_library(${name} INTERFACE)
  if(NOT CORRAL_RPC_ARCHIVES)
    target_link_libraries(${name} INTERFACE ${shared})
    return()
  endif()
  foreach(prop INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS)
    set_property(TARGET ${name} APPEND PROPERTY INTERFACE_${prop}
                 $<TARGET_PROPERTY:${shared},INTERFACE_${prop}>)
  endforeach()
  target_link_libraries(${name} INTERFACE
    "$<IF:${corral_static_head},${compiled},${shared}>")
endfunction()
corral_compiled_or_shared(corral_fmt fmt::fmt corral_fmt_compiled)
corral_compiled_or_shared(corral_toml PkgConfig::TOMLPP corral_toml_compiled)
if(CORRAL_RPC_ARCHIVES)
  # Not position-independent: a PIE's ~37,000 relative relocations write (copy) every page
  # of vtables and pointer tables at each start, 150 page faults of the command's 300.
  # The command is an unprivileged user's client; the daemons and corral-imp stay PIE.
  target_link_options(corral_rpc INTERFACE
    "$<${corral_static_head}:-static-libstdc++;-static-libgcc;-no-pie>")
endif()
