# gpuslice_proto_library(TARGET PROTO_FILE [GRPC])
# Generates C++ (and, with GRPC, gRPC service) code from one .proto under
# ${PROJECT_SOURCE_DIR}/proto into the build tree, as a static library whose
# include path is the generated root. Generated code is never committed.
function(gpuslice_proto_library target proto)
  cmake_parse_arguments(ARG "GRPC" "" "" ${ARGN})
  set(proto_root ${PROJECT_SOURCE_DIR}/proto)
  set(out ${CMAKE_BINARY_DIR}/generated/proto)
  file(RELATIVE_PATH rel ${proto_root} ${proto})
  string(REGEX REPLACE "\\.proto$" "" base ${rel})
  set(srcs ${out}/${base}.pb.cc ${out}/${base}.pb.h)
  set(plugin_args)
  if(ARG_GRPC)
    list(APPEND srcs ${out}/${base}.grpc.pb.cc ${out}/${base}.grpc.pb.h)
    set(plugin_args --grpc_out=${out} --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>)
  endif()
  file(MAKE_DIRECTORY ${out})
  add_custom_command(
    OUTPUT ${srcs}
    COMMAND protobuf::protoc --proto_path=${proto_root} --cpp_out=${out} ${plugin_args} ${proto}
    DEPENDS ${proto}
    COMMENT "protoc ${rel}")
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} PUBLIC ${out})
  target_link_libraries(${target} PUBLIC gpuslice_protobuf)
  if(ARG_GRPC)
    target_link_libraries(${target} PUBLIC gpuslice_grpc)
  endif()
endfunction()
