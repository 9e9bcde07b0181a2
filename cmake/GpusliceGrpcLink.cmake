# gpuslice_grpc and gpuslice_protobuf: what our targets link for gRPC and
# protobuf. With GPUSLICE_STATIC_GRPC (the default) they are Debian's static
# archives, so that a `gpuslice run` does not spend its start-up in the
# dynamic loader resolving the 56 shared libraries of Debian's gRPC stack
# (docs/benchmarks.md, "Load: 500 processes joining vGPUs at once"). OpenSSL,
# zlib and libc stay shared: the HTTPS client links OpenSSL itself, and one
# process must not hold two copies of it. Where an archive is missing, the
# shared libraries are linked and configure says so.
option(GPUSLICE_STATIC_GRPC "Link gRPC, abseil and protobuf from their static archives" ON)

add_library(gpuslice_grpc INTERFACE)
add_library(gpuslice_protobuf INTERFACE)

set(_gpuslice_static_ok OFF)
if(GPUSLICE_STATIC_GRPC)
  pkg_check_modules(GRPCPP_PC QUIET grpc++)
  # Everything `pkg-config --static grpc++` names, but what stays shared.
  set(_shared_kept ssl crypto z dl rt m atomic pthread systemd)
  set(_archives)
  set(_missing)
  foreach(_name IN LISTS GRPCPP_PC_STATIC_LIBRARIES)
    if(_name IN_LIST _shared_kept)
      continue()
    endif()
    find_library(_archive_${_name} NAMES lib${_name}.a NO_CACHE)
    if(_archive_${_name})
      list(APPEND _archives ${_archive_${_name}})
    else()
      list(APPEND _missing ${_name})
    endif()
  endforeach()
  find_library(_archive_protobuf NAMES libprotobuf.a NO_CACHE)
  if(GRPCPP_PC_FOUND AND _archives AND NOT _missing AND _archive_protobuf)
    set(_gpuslice_static_ok ON)
  else()
    message(STATUS "gRPC: static archives missing (${_missing}); linking the shared libraries")
  endif()
endif()

if(_gpuslice_static_ok)
  list(REMOVE_DUPLICATES _archives)
  # Archives that refer to each other in every order (abseil's), so the
  # linker rescans the group. The shared libraries they need are named after
  # it as plain flags: CMake keeps one copy of a repeated target, the first,
  # which may sit before the group, where --as-needed drops it.
  target_link_libraries(gpuslice_grpc INTERFACE "$<LINK_GROUP:RESCAN,${_archives}>" -lssl -lcrypto -lz -ldl -lrt
                                                Threads::Threads)
  target_include_directories(gpuslice_grpc INTERFACE $<TARGET_PROPERTY:gRPC::grpc++,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(gpuslice_protobuf INTERFACE ${_archive_protobuf} Threads::Threads)
  target_include_directories(gpuslice_protobuf INTERFACE
                             $<TARGET_PROPERTY:protobuf::libprotobuf,INTERFACE_INCLUDE_DIRECTORIES>)
  message(STATUS "gRPC: static archives (${GRPCPP_PC_VERSION})")
else()
  target_link_libraries(gpuslice_grpc INTERFACE gRPC::grpc++)
  target_link_libraries(gpuslice_protobuf INTERFACE protobuf::libprotobuf)
endif()
