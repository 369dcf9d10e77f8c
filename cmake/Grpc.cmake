# gRPC services (Debian's libgrpc++-dev and protobuf-compiler-grpc): the
# master's API and the etcd client speak it.
find_package(gRPC CONFIG REQUIRED)

# nanokv_grpc_library(name OUT_DIR dir PROTOS a.proto ...): a static library of
# the messages and the service stubs generated from PROTOS. Generated code is
# built without our warning flags (it is not ours to fix); protoc names the
# files after the protos' paths under the calling folder, inside OUT_DIR, so a
# folder's protos are included as "<folder>/<path>.grpc.pb.h" when OUT_DIR is
# the build folder of that folder's parent.
function(nanokv_grpc_library name)
  cmake_parse_arguments(G "" "OUT_DIR" "PROTOS;IMPORT_DIRS" ${ARGN})
  file(MAKE_DIRECTORY ${G_OUT_DIR})
  add_library(${name} STATIC ${G_PROTOS})
  protobuf_generate(TARGET ${name} LANGUAGE cpp PROTOC_OUT_DIR ${G_OUT_DIR}
    IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR} ${G_IMPORT_DIRS})
  protobuf_generate(TARGET ${name} LANGUAGE grpc PROTOC_OUT_DIR ${G_OUT_DIR}
    GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
    PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
    IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR} ${G_IMPORT_DIRS})
  target_include_directories(${name} SYSTEM PUBLIC ${PROJECT_BINARY_DIR} ${G_OUT_DIR}
    ${Protobuf_INCLUDE_DIRS})
  target_link_libraries(${name} PUBLIC protobuf::libprotobuf gRPC::grpc++)
endfunction()
