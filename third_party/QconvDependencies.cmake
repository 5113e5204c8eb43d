# How qconv finds its dependencies. All come from Debian packages; nothing is copied here.
#   libprotobuf-dev, protobuf-compiler  -> protobuf::libprotobuf
#   libonnx-dev (ONNX 1.12)             -> onnx (checker, schemas), onnx_proto (protobuf classes)
#   libcli11-dev                        -> CLI11::CLI11 (header only)
#   libspdlog-dev, libfmt-dev           -> spdlog::spdlog, fmt::fmt
#   nlohmann-json3-dev                  -> nlohmann_json::nlohmann_json (header only: --report, --json)
#   libc (pthreads)                     -> Threads::Threads (the checker's schemas load on a second thread)
#   catch2 (v2)                         -> Catch2::Catch2 (tests only)
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/OnnxSchemaTable.cmake)
if(QCONV_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
