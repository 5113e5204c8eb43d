#include "qconv/pipeline/write_plan.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "qconv/diag.h"
#include "qconv/io/external_refs.h"
#include "qconv/io/model_io.h"
#include "qconv/io/temp_file.h"

namespace qconv {

namespace {

using Id = std::pair<uint64_t, uint64_t>;

Id idOf(const struct stat& st) { return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}; }

/// A path resolved: the file(s) it names where it exists (the entry, and what a symbolic link
/// there leads to), and its folder's identity with its name (known where the folder exists).
struct Place {
  std::vector<Id> files;
  std::optional<std::tuple<uint64_t, uint64_t, std::string>> entry;
};

Place resolve(const std::string& path) {
  Place p;
  const io::PathParts parts = io::splitPath(path);
  struct stat st {};
  if (stat(parts.dir.c_str(), &st) == 0) p.entry = std::make_tuple(idOf(st).first, idOf(st).second, parts.base);
  if (lstat(path.c_str(), &st) == 0) p.files.push_back(idOf(st));
  if (stat(path.c_str(), &st) == 0 && (p.files.empty() || p.files.back() != idOf(st))) p.files.push_back(idOf(st));
  return p;
}

/// `name` in the folder open as `folder`, as resolve() gives a path: the checks then hold for the
/// folder the write will use (io::Folder), whatever its path names later.
Place resolveIn(const io::Folder& folder, const std::string& name) {
  Place p;
  struct stat st {};
  if (fstat(folder.fd(), &st) == 0) p.entry = std::make_tuple(idOf(st).first, idOf(st).second, name);
  if (fstatat(folder.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) p.files.push_back(idOf(st));
  if (fstatat(folder.fd(), name.c_str(), &st, 0) == 0 && (p.files.empty() || p.files.back() != idOf(st)))
    p.files.push_back(idOf(st));
  return p;
}

/// Places with what each one is, for the message: a file found by either identity.
class Places {
 public:
  void add(const Place& p, const std::string& what) {
    for (const Id& id : p.files) files_.emplace(id, what);
    if (p.entry) entries_.emplace(*p.entry, what);
  }
  const std::string* find(const Place& p) const {
    for (const Id& id : p.files)
      if (auto it = files_.find(id); it != files_.end()) return &it->second;
    if (p.entry)
      if (auto it = entries_.find(*p.entry); it != entries_.end()) return &it->second;
    return nullptr;
  }
  std::vector<Id> ids() const {
    std::vector<Id> all;
    for (const auto& [id, _] : files_) all.push_back(id);
    return all;  // a map's keys: sorted
  }

 private:
  std::map<Id, std::string> files_;
  std::map<std::tuple<uint64_t, uint64_t, std::string>, std::string> entries_;
};

/// What every item reads: its input, and each file its external data names (resolved from the
/// input's folder, as io::ExternalFiles opens them).
Places whatIsRead(const std::vector<std::string>& inputs) {
  Places reads;
  for (const std::string& in : inputs) {
    reads.add(resolve(in), fmt::format("input {}", in));
    const std::string dir = io::splitPath(in).dir;
    for (const std::string& location : io::externalLocations(in))
      if (!location.empty() && location[0] != '/')
        reads.add(resolve(dir + "/" + location), fmt::format("the external data file '{}' of input {}", location, in));
  }
  return reads;
}

/// The names in `dir` the commit of each output there may sweep: its data files and the
/// temporaries a killed commit of it left. One listing for all of them.
void listSweepNames(const io::Folder& folder, const std::map<std::string, size_t>& outputs,
                    std::vector<std::vector<std::string>>& names) {
  const int fd = dup(folder.fd());
  if (fd < 0) return;
  DIR* d = fdopendir(fd);  // owns fd now
  if (!d) {
    close(fd);
    return;
  }
  rewinddir(d);  // a dup shares the folder's offset
  while (const dirent* e = readdir(d)) {
    for (const std::string& owner : io::sweptNameOwners(e->d_name))
      if (auto it = outputs.find(owner); it != outputs.end()) names[it->second].emplace_back(e->d_name);
  }
  closedir(d);
}

/// Whether `name` is OUT.<anything>.data beside output `base`: the names its data files take
/// (io::dataFileName), which no other file of the run should have, a report included.
bool inDataFileNamespace(const std::string& base, const std::string& name) {
  const std::string prefix = base + ".", suffix = ".data";
  return name.size() > prefix.size() + suffix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void refuse(const std::string& path, const std::string& what, const std::string& role) {
  throw Error(ExitCode::Usage,
              what.rfind("input ", 0) == 0 && role == "the output would replace it"
                  ? fmt::format("{}: output is the input file ({}); qconv never modifies its input", path, what)
                  : fmt::format("{}: this file is the input or holds its external data; qconv never modifies its "
                                "input (it is {}, and {})", path, what, role));
}

}  // namespace

WritePlan planWrites(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                     const std::string& report, const std::string& node_data) {
  const Places reads = whatIsRead(inputs);
  WritePlan plan;
  plan.sweep_names.resize(outputs.size());
  std::map<std::string, std::map<std::string, size_t>> byFolder;  // folder -> output file name -> index
  std::map<std::string, std::shared_ptr<const io::Folder>> opened;  // each folder opened once
  plan.folders.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const io::PathParts parts = io::splitPath(outputs[i]);
    byFolder[parts.dir].emplace(parts.base, i);
    auto [it, fresh] = opened.emplace(parts.dir, nullptr);
    if (fresh) it->second = io::Folder::tryOpen(parts.dir);  // none: the write fails later, saying why
    plan.folders[i] = it->second;
  }
  for (const auto& [dir, names] : byFolder)
    if (const auto& folder = opened[dir]) listSweepNames(*folder, names, plan.sweep_names);

  // each output resolved in the folder the write will use (io::Folder), not by its path again
  auto place = [&](size_t i, const std::string& name) {
    return plan.folders[i] ? resolveIn(*plan.folders[i], name) : resolve(io::splitPath(outputs[i]).dir + "/" + name);
  };
  Places written;  // for the report's check
  std::vector<Place> outPlaces;
  for (size_t i = 0; i < outputs.size(); ++i) {
    outPlaces.push_back(place(i, io::splitPath(outputs[i]).base));
    const Place& out = outPlaces.back();
    if (const std::string* what = reads.find(out)) refuse(outputs[i], *what, "the output would replace it");
    written.add(out, fmt::format("output {}", outputs[i]));
    const std::string dir = io::splitPath(outputs[i]).dir;
    for (const std::string& name : plan.sweep_names[i]) {
      const Place old = place(i, name);
      // a file the sweep leaves (a data file by its name only, not by its bytes) is no concern
      const std::string* what = reads.find(old);
      if (what && (io::dataFileOwner(name).empty() || io::tagMatchesIn(*plan.folders[i], name)))
        refuse(dir + "/" + name, *what, fmt::format("the output {} would replace or remove it", outputs[i]));
      written.add(old, fmt::format("a file the output {} would replace or remove", outputs[i]));
    }
  }
  // the report and the overlay: neither an input, nor an output or its files, nor each other
  auto side = [&](const char* flag, const std::string& path) -> std::shared_ptr<const io::Folder> {
    if (path.empty()) return nullptr;
    const io::PathParts parts = io::splitPath(path);
    std::shared_ptr<const io::Folder> folder = io::Folder::tryOpen(parts.dir);
    const Place r = folder ? resolveIn(*folder, parts.base) : resolve(path);
    const std::string* what = reads.find(r);
    if (!what) what = written.find(r);
    std::string named;  // a data file not written yet: its name and folder say whose it would be
    for (size_t i = 0; !what && r.entry && i < outputs.size(); ++i) {
      const auto& e = outPlaces[i].entry;
      if (e && std::get<0>(*e) == std::get<0>(*r.entry) && std::get<1>(*e) == std::get<1>(*r.entry) &&
          (io::isSweptName(std::get<2>(*e), std::get<2>(*r.entry)) ||
           inDataFileNamespace(std::get<2>(*e), std::get<2>(*r.entry))))
        what = &(named = fmt::format("named as a file of output {}", outputs[i]));
    }
    if (what)
      throw Error(ExitCode::Usage, fmt::format("{} {}: names an input or an output of this run ({}); it would "
                                               "replace it", flag, path, *what));
    written.add(r, fmt::format("{} {}", flag, path));
    return folder;
  };
  plan.report_folder = side("--report", report);
  plan.node_data_folder = side("--node-data", node_data);
  plan.protected_files = reads.ids();
  return plan;
}

}  // namespace qconv
