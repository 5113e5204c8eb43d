// spdlog's compiled part, built from Debian's libspdlog-dev headers into qconv's own static
// library (QconvDependencies.cmake: qconv_spdlog), for the reason fmt_compiled.cpp gives. With
// SPDLOG_COMPILED_LIB defined the headers declare what their -inl.h files define; this file
// includes those once, and instantiates the sink bases qconv's sinks derive from.
#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>

#include <mutex>

template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
