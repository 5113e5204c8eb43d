# How qconv finds its dependencies. All but ONNX come from Debian packages; nothing is copied here.
#   libprotobuf-dev, protobuf-compiler  -> protobuf::libprotobuf
#   ONNX (third_party/onnx.pin)         -> ONNX::onnx (checker, schemas, shape inference),
#                                          ONNX::onnx_proto (protobuf classes); built from PyPI's
#                                          source distribution by scripts/build_onnx.sh into build/deps/
#   libcli11-dev                        -> CLI11::CLI11 (header only)
#   libspdlog-dev, libfmt-dev           -> spdlog::spdlog, fmt::fmt
#   nlohmann-json3-dev                  -> nlohmann_json::nlohmann_json (header only: --report, --json)
#   libc (pthreads)                     -> Threads::Threads (the checker's schemas load on a second thread)
#   catch2 (v2)                         -> Catch2::Catch2 (tests only)
find_package(Protobuf)
if(NOT Protobuf_FOUND)
  message(FATAL_ERROR "qconv links Debian's protobuf (libprotobuf-dev, protobuf-compiler), spdlog, fmt, CLI11 and "
    "nlohmann-json: scripts/setup.sh --no-venv installs them (apt-get)")
endif()
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/onnx.pin QCONV_ONNX_PIN REGEX "^version=")
string(REPLACE "version=" "" QCONV_ONNX_VERSION "${QCONV_ONNX_PIN}")
set(QCONV_ONNX_PREFIX ${PROJECT_SOURCE_DIR}/build/deps/onnx-${QCONV_ONNX_VERSION}/install)
find_package(ONNX ${QCONV_ONNX_VERSION} EXACT CONFIG HINTS ${QCONV_ONNX_PREFIX})
if(NOT ONNX_FOUND AND QCONV_PYTHON)
  # pip install . on a machine that never ran scripts/setup.sh: build the pinned ONNX now, into
  # the same cache (build/deps/), so that the next build of either kind finds it
  message(STATUS "qconv: building ONNX ${QCONV_ONNX_VERSION} (third_party/onnx.pin) once: scripts/build_onnx.sh")
  execute_process(COMMAND "${PROJECT_SOURCE_DIR}/scripts/build_onnx.sh" RESULT_VARIABLE built OUTPUT_QUIET)
  if(NOT built EQUAL 0)
    message(FATAL_ERROR "scripts/build_onnx.sh failed (exit ${built}): see its messages above")
  endif()
  find_package(ONNX ${QCONV_ONNX_VERSION} EXACT CONFIG HINTS ${QCONV_ONNX_PREFIX})
endif()
if(NOT ONNX_FOUND)
  message(FATAL_ERROR "qconv builds on ONNX ${QCONV_ONNX_VERSION} (third_party/onnx.pin): "
    "run scripts/build_onnx.sh (scripts/setup.sh does), or point CMAKE_PREFIX_PATH at an install of it")
endif()
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/OnnxSchemaTable.cmake)
if(QCONV_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
