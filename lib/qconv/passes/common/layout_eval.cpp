#include "qconv/passes/common/layout_eval.h"

#include <fmt/format.h>

#include <algorithm>

namespace qconv::eval {

namespace {

/// Index `k` of a dimension of size `n`, negative from the end; nullopt outside [-n, n).
std::optional<size_t> axisIndex(int64_t k, size_t n) {
  const int64_t r = k < 0 ? k + static_cast<int64_t>(n) : k;
  if (r < 0 || r >= static_cast<int64_t>(n)) return std::nullopt;
  return static_cast<size_t>(r);
}

size_t count(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

/// Row-major strides of `dims`.
std::vector<size_t> stridesOf(const std::vector<int64_t>& dims) {
  std::vector<size_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * static_cast<size_t>(dims[k]);
  return s;
}

/// Every element of `out_dims`, in order, copied from `x` at the index `source` maps it to.
template <class Source>
Tensor gatherBy(const Tensor& x, std::vector<int64_t> out_dims, Source source) {
  Tensor out{x.type, std::move(out_dims), {}, {}};
  const size_t n = count(out.dims);
  (x.isFloat() ? out.f.reserve(n) : out.i.reserve(n));
  std::vector<int64_t> at(out.dims.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = source(at);
    if (x.isFloat()) out.f.push_back(x.f[i]);
    else out.i.push_back(x.i[i]);
    for (size_t a = at.size(); a-- > 0;) {  // the next index, last axis fastest
      if (++at[a] < out.dims[a]) break;
      at[a] = 0;
    }
  }
  return out;
}

}  // namespace

std::optional<Tensor> slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                            const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, std::string* why) {
  const size_t rank = x.dims.size(), m = starts.size();
  if (ends.size() != m || (!axes.empty() && axes.size() != m) || (!steps.empty() && steps.size() != m) || !rank) {
    *why = "a Slice whose starts, ends, axes and steps differ in length, or of a scalar";
    return std::nullopt;
  }
  std::vector<int64_t> first(rank, 0), step(rank, 1), dims = x.dims;
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < m; ++j) {
    const auto axis = axisIndex(axes.empty() ? static_cast<int64_t>(j) : axes[j], rank);
    if (!axis || seen[*axis]) {
      *why = "a Slice axis outside the rank, or repeated";
      return std::nullopt;
    }
    seen[*axis] = true;
    const int64_t n = x.dims[*axis], st = steps.empty() ? 1 : steps[j];
    if (st == 0) {
      *why = "a Slice step of 0";
      return std::nullopt;
    }
    auto clampAt = [&](int64_t v, int64_t lo, int64_t hi) {  // the specification's clamping of starts and ends
      if (v < 0) v += n;
      return std::clamp<int64_t>(v, lo, hi);
    };
    const int64_t s = st > 0 ? clampAt(starts[j], 0, n) : clampAt(starts[j], -1, n - 1);
    const int64_t e = st > 0 ? clampAt(ends[j], 0, n) : clampAt(ends[j], -1, n - 1);
    const int64_t len = st > 0 ? (e > s ? (e - s + st - 1) / st : 0) : (s > e ? (s - e - st - 1) / -st : 0);
    first[*axis] = s;
    step[*axis] = st;
    dims[*axis] = len;
  }
  const auto stride = stridesOf(x.dims);
  return gatherBy(x, dims, [&](const std::vector<int64_t>& at) {
    size_t i = 0;
    for (size_t a = 0; a < rank; ++a) i += static_cast<size_t>(first[a] + at[a] * step[a]) * stride[a];
    return i;
  });
}

std::optional<Tensor> transpose(const Tensor& x, std::vector<int64_t> perm, std::string* why) {
  const size_t rank = x.dims.size();
  if (perm.empty())
    for (size_t k = rank; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k)
    if (sorted.size() != rank || sorted[k] != static_cast<int64_t>(k)) {
      *why = "a Transpose whose perm is not a permutation of the input's axes";
      return std::nullopt;
    }
  std::vector<int64_t> dims(rank);
  for (size_t a = 0; a < rank; ++a) dims[a] = x.dims[static_cast<size_t>(perm[a])];
  const auto stride = stridesOf(x.dims);
  return gatherBy(x, dims, [&](const std::vector<int64_t>& at) {
    size_t i = 0;
    for (size_t a = 0; a < rank; ++a) i += static_cast<size_t>(at[a]) * stride[static_cast<size_t>(perm[a])];
    return i;
  });
}

std::optional<Tensor> concat(const std::vector<Tensor>& xs, int64_t axis, std::string* why) {
  if (xs.empty()) {
    *why = "a Concat of nothing";
    return std::nullopt;
  }
  const Tensor& first = xs[0];
  const auto ax = axisIndex(axis, first.dims.size());
  if (!ax) {
    *why = fmt::format("a Concat axis {} outside rank {}", axis, first.dims.size());
    return std::nullopt;
  }
  Tensor out{first.type, first.dims, {}, {}};
  out.dims[*ax] = 0;
  for (const Tensor& t : xs) {
    bool fits = t.type == first.type && t.dims.size() == first.dims.size();
    for (size_t a = 0; fits && a < t.dims.size(); ++a) fits = a == *ax || t.dims[a] == first.dims[a];
    if (!fits) {
      *why = "a Concat of tensors of different types, ranks or dims";
      return std::nullopt;
    }
    out.dims[*ax] += t.dims[*ax];
  }
  // row-major: each input contributes a run of dims[ax..] elements per index of the axes before
  size_t outer = 1;
  for (size_t a = 0; a < *ax; ++a) outer *= static_cast<size_t>(first.dims[a]);
  for (size_t o = 0; o < outer; ++o)
    for (const Tensor& t : xs) {
      const size_t run = count(t.dims) / std::max<size_t>(outer, 1);
      if (t.isFloat()) out.f.insert(out.f.end(), t.f.begin() + static_cast<std::ptrdiff_t>(o * run),
                                    t.f.begin() + static_cast<std::ptrdiff_t>((o + 1) * run));
      else out.i.insert(out.i.end(), t.i.begin() + static_cast<std::ptrdiff_t>(o * run),
                        t.i.begin() + static_cast<std::ptrdiff_t>((o + 1) * run));
    }
  return out;
}

std::optional<Tensor> redim(const Tensor& x, std::vector<int64_t> axes, bool insert, std::string* why) {
  Tensor out = x;
  const size_t rank = x.dims.size() + (insert ? axes.size() : 0);
  if (!insert && axes.empty())
    for (size_t k = 0; k < x.dims.size(); ++k)
      if (x.dims[k] == 1) axes.push_back(static_cast<int64_t>(k));
  std::vector<size_t> at;
  for (int64_t a : axes) {
    const auto i = axisIndex(a, rank);
    if (!i) {
      *why = fmt::format("an axis {} outside rank {}", a, rank);
      return std::nullopt;
    }
    at.push_back(*i);
  }
  std::sort(at.begin(), at.end());
  if (insert) {
    for (size_t i : at) out.dims.insert(out.dims.begin() + static_cast<std::ptrdiff_t>(std::min(i, out.dims.size())), 1);
    return out;
  }
  for (auto it = at.rbegin(); it != at.rend(); ++it) {
    if (out.dims[*it] != 1) {
      *why = fmt::format("a Squeeze of axis {}, of dimension {}", *it, out.dims[*it]);
      return std::nullopt;
    }
    out.dims.erase(out.dims.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  return out;
}

}  // namespace qconv::eval
