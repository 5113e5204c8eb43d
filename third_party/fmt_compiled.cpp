// fmt's compiled part, built from Debian's libfmt-dev headers into qconv's own static library
// (QconvDependencies.cmake: qconv_fmt). Debian ships fmt as headers plus a shared library only;
// linking that library costs every run of the command its dynamic loading, and defining
// FMT_HEADER_ONLY compiles all of this in each of our sources that formats (3 s each). The
// headers carry the implementation (format-inl.h): this file makes its non-inline functions once,
// with the instantiations format.h declares extern, and nothing of its own.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;

template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template void buffer<char>::append(const char*, const char*);
template void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref) -> wchar_t;
template void buffer<wchar_t>::append(const wchar_t*, const wchar_t*);

}  // namespace detail
FMT_END_NAMESPACE
