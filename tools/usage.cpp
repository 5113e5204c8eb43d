#include "usage.h"

#include <fmt/format.h>

#include <algorithm>

namespace qconv::cli {

namespace {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      // a swap of two neighbours is one edit, as in "--fromat"
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], diagonal);
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 3;  // more than 2 edits: not a typo
  for (const std::string& c : candidates) {
    const size_t d = editDistance(word, c);
    if (d < best_distance && 2 * d < word.size()) best = c, best_distance = d;
  }
  return best;
}

std::vector<std::string> flagsOf(const CLI::App& app) {
  std::vector<std::string> flags;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) flags.push_back("--" + l);
    for (const std::string& s : o->get_snames()) flags.push_back("-" + s);
  }
  return flags;
}

std::vector<std::string> subcommandsOf(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}

std::string unexpected(const CLI::App& app) {
  const std::string command = app.get_parent() ? "qconv " + app.get_name() : "qconv";
  for (const std::string& arg : app.remaining()) {
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string flag = arg.substr(0, arg.find('='));
      const std::string near = nearest(flag, flagsOf(app));
      return fmt::format("unknown flag {} for '{}'{} ('qconv help{}' lists them)", flag, command,
                         near.empty() ? "" : fmt::format("; did you mean {}?", near),
                         app.get_parent() ? " " + app.get_name() : "");
    }
    return fmt::format("unexpected argument '{}' for '{}' ('qconv help{}')", arg, command,
                       app.get_parent() ? " " + app.get_name() : "");
  }
  return {};
}

}  // namespace qconv::cli
