# How qconv finds its dependencies. All but ONNX come from Debian packages; nothing is copied here.
#   libprotobuf-dev, protobuf-compiler  -> protobuf::libprotobuf-lite (static for a static command)
#   ONNX (third_party/onnx.pin)         -> ONNX::onnx (checker, schemas, shape inference),
#                                          ONNX::onnx_proto (protobuf classes, lite runtime); built from
#                                          PyPI's source distribution by scripts/build_onnx.sh into build/deps/
#   libcli11-dev                        -> CLI11::CLI11 (header only)
#   libspdlog-dev, libfmt-dev           -> qconv_spdlog, qconv_fmt: their compiled parts built here from
#                                          the packages' headers (fmt_compiled.cpp, spdlog_compiled.cpp)
#   nlohmann-json3-dev                  -> nlohmann_json::nlohmann_json (header only: --report, --json)
#   libc (pthreads)                     -> Threads::Threads (the writer's and the batch's threads)
#   catch2 (v2)                         -> Catch2::Catch2 (tests only)
if(QCONV_STATIC_CLI)
  set(Protobuf_USE_STATIC_LIBS ON)  # libprotobuf-lite.a: the command links no shared library
  foreach(found Protobuf_LITE_LIBRARY_RELEASE Protobuf_LITE_LIBRARY_DEBUG Protobuf_LIBRARY_RELEASE Protobuf_LIBRARY_DEBUG)
    if("${${found}}" MATCHES "\\.so$")  # a build folder configured when the command was linked shared
      unset(${found} CACHE)
    endif()
  endforeach()
endif()
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
# Debian ships fmt and spdlog as headers and shared libraries only. Linked shared, they cost each
# run of the command its dynamic loading (with the libstdc++ they load); header-only, they cost
# each source that formats 3 s of compiling. So their compiled parts are built once, here, from
# the packages' own headers, into static libraries of ours (no code of theirs is copied).
get_target_property(QCONV_FMT_INCLUDES fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
add_library(qconv_fmt STATIC ${CMAKE_CURRENT_LIST_DIR}/fmt_compiled.cpp)
target_include_directories(qconv_fmt SYSTEM PUBLIC ${QCONV_FMT_INCLUDES})
get_target_property(QCONV_SPDLOG_INCLUDES spdlog::spdlog INTERFACE_INCLUDE_DIRECTORIES)
add_library(qconv_spdlog STATIC ${CMAKE_CURRENT_LIST_DIR}/spdlog_compiled.cpp)
target_include_directories(qconv_spdlog SYSTEM PUBLIC ${QCONV_SPDLOG_INCLUDES})
target_compile_definitions(qconv_spdlog PUBLIC SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL)
target_link_libraries(qconv_spdlog PUBLIC qconv_fmt Threads::Threads)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/OnnxSchemaTable.cmake)
if(QCONV_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
