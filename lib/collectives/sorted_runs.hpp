// Sorted (offset, value) runs merged into one, equal offsets combined: the sparse allreduce's
// root when every contribution to a block arrives strictly ascending (sparse_allreduce.cpp,
// add_run), sequential passes instead of a dense accumulator's random accesses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace netsparse::collectives {

// a (na entries) and b (nb) merged into o and v (room for na + nb), equal offsets combined by
// add(a's value, b's value); returns the entries written.
template <class T, class Add>
std::size_t merge_two_runs(const std::uint32_t* ao, const T* av, std::size_t na,
                           const std::uint32_t* bo, const T* bv, std::size_t nb, std::uint32_t* o,
                           T* v, Add add) {
  std::size_t x = 0, y = 0, k = 0;
  while (x < na && y < nb) {
    if (ao[x] < bo[y]) {
      o[k] = ao[x];
      v[k++] = av[x++];
    } else if (bo[y] < ao[x]) {
      o[k] = bo[y];
      v[k++] = bv[y++];
    } else {
      o[k] = ao[x];
      v[k++] = add(av[x++], bv[y++]);
    }
  }
  for (; x < na; ++x, ++k) o[k] = ao[x], v[k] = av[x];
  for (; y < nb; ++y, ++k) o[k] = bo[y], v[k] = bv[y];
  return k;
}

// The runs (ro[k] offsets, rv[k] values; at least one) merged pairwise in rounds (log of their
// number passes) into offs / vals; the runs serve as scratch and are left empty. tmp_o / tmp_v:
// scratch kept by the caller.
template <class OffVec, class ValVec, class Add>
void merge_sorted_runs(std::vector<OffVec*> ro, std::vector<ValVec*> rv, OffVec& offs, ValVec& vals,
                       OffVec& tmp_o, ValVec& tmp_v, Add add) {
  std::vector<OffVec*> all_o = ro;
  std::vector<ValVec*> all_v = rv;
  while (ro.size() > 2) {
    std::vector<OffVec*> next_o;
    std::vector<ValVec*> next_v;
    for (std::size_t k = 0; k + 1 < ro.size(); k += 2) {
      tmp_o.resize(ro[k]->size() + ro[k + 1]->size());
      tmp_v.resize(tmp_o.size());
      const std::size_t m =
          merge_two_runs(ro[k]->data(), rv[k]->data(), ro[k]->size(), ro[k + 1]->data(),
                         rv[k + 1]->data(), ro[k + 1]->size(), tmp_o.data(), tmp_v.data(), add);
      tmp_o.resize(m);
      tmp_v.resize(m);
      ro[k]->swap(tmp_o);  // the pair's result lives in the first run
      rv[k]->swap(tmp_v);
      ro[k + 1]->clear();
      rv[k + 1]->clear();
      next_o.push_back(ro[k]);
      next_v.push_back(rv[k]);
    }
    if (ro.size() % 2 == 1) {
      next_o.push_back(ro.back());
      next_v.push_back(rv.back());
    }
    ro.swap(next_o);
    rv.swap(next_v);
  }
  const std::size_t na = ro[0]->size(), nb = ro.size() > 1 ? ro[1]->size() : 0;
  offs.resize(na + nb);
  vals.resize(na + nb);
  std::size_t m = na;
  if (nb == 0) {
    std::copy(ro[0]->begin(), ro[0]->end(), offs.begin());
    std::copy(rv[0]->begin(), rv[0]->end(), vals.begin());
  } else {
    m = merge_two_runs(ro[0]->data(), rv[0]->data(), na, ro[1]->data(), rv[1]->data(), nb,
                       offs.data(), vals.data(), add);
  }
  offs.resize(m);
  vals.resize(m);
  for (auto* r : all_o) r->clear();
  for (auto* r : all_v) r->clear();
}

}  // namespace netsparse::collectives
