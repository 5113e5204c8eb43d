// What the command line says about a usage error: the nearest valid word, the unknown flags a
// subcommand was given. Argument parsing only (qconv_main.cpp); nothing here reads a model.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace qconv::cli {

/// The candidate nearest to `word` by edit distance, or empty when none is near enough to be
/// what was meant (at most 2 edits, and fewer than half the word's length).
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

/// Every flag `app` takes, as typed: "--format", "-j", ...
std::vector<std::string> flagsOf(const CLI::App& app);

/// The first argument `app` did not take (its remaining(), allow_extras on), as a usage error:
/// "unknown flag --fromat for 'qconv convert'; did you mean --format?", or empty.
std::string unexpected(const CLI::App& app);

/// The subcommand names of `app`.
std::vector<std::string> subcommandsOf(const CLI::App& app);

}  // namespace qconv::cli
