#include "filter/row_state.hpp"

#include <algorithm>

namespace netsparse::filter {

void RowStateFilter::resize(std::uint64_t rows) {
  const std::uint64_t words = (rows + kRowsPerWord - 1) / kRowsPerWord;
  rows_ = rows;
  if (words <= capacity_words_) {
    new_epoch();
    return;
  }
  words_ = std::make_unique<std::uint64_t[]>(words);  // zeroed: tag 0, stale
  capacity_words_ = words;
  epoch_ = 1;
}

void RowStateFilter::new_epoch() noexcept {
  if (++epoch_ == 0) {
    std::fill_n(words_.get(), capacity_words_, std::uint64_t{0});
    epoch_ = 1;
  }
}

std::uint64_t RowStateFilter::count(RowState s) const noexcept {
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < rows_; ++i) n += state(i) == s ? 1 : 0;
  return n;
}

}  // namespace netsparse::filter
