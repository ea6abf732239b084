// Token scanning shared by the text readers (internal to the sparse component).
//
// Everything works on [p, end) ranges of one line (the '\n' excluded), never reads past end,
// uses no locale and allocates nothing unless an error message is built.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

namespace netsparse::sparse_detail {

// Blanks separate tokens. '\r' counts as one so CRLF files need no special case.
inline bool is_blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

inline const char* skip_blanks(const char* p, const char* end) noexcept {
  while (p < end && is_blank(*p)) ++p;
  return p;
}

inline const char* token_end(const char* p, const char* end) noexcept {
  while (p < end && !is_blank(*p)) ++p;
  return p;
}

// End of the line starting at p: the position of its '\n', or end.
inline const char* line_end(const char* p, const char* end) noexcept {
  const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
  return nl != nullptr ? static_cast<const char*>(nl) : end;
}

// The token at p, quoted and shortened for an error message.
inline std::string quoted_token(const char* p, const char* end) {
  constexpr std::ptrdiff_t kMaxShown = 40;
  const char* e = token_end(p, end);
  std::string s = "'";
  if (e - p > kMaxShown) {
    s.append(p, static_cast<std::size_t>(kMaxShown));
    s += "...";
  } else {
    s.append(p, static_cast<std::size_t>(e - p));
  }
  s += "'";
  return s;
}

enum class NumberStatus {
  ok,
  not_numeric,   // the token is not a number of the expected kind
  negative,      // a '-' where only non-negative integers are allowed
  out_of_range,  // does not fit (64-bit integer; finite double)
};

struct ParsedInteger {
  std::int64_t value = 0;
  const char* next = nullptr;  // first byte after the token (only valid when ok)
  NumberStatus status = NumberStatus::ok;
};

// Parses a token that must be a decimal integer (no sign unless allow_negative) followed by a
// blank or the end of the line. p must point at the token's first byte (p < end).
inline ParsedInteger parse_integer(const char* p, const char* end, bool allow_negative) noexcept {
  ParsedInteger out;
  const char* q = p;
  bool negative = false;
  if (*q == '-' || *q == '+') {
    negative = *q == '-';
    ++q;
  }
  // Up to 18 digits cannot overflow an int64, so the common case needs no overflow test.
  std::uint64_t value = 0;
  const char* digits_begin = q;
  while (q < end) {
    const unsigned digit = static_cast<unsigned>(*q) - '0';
    if (digit > 9) break;
    value = value * 10 + digit;
    ++q;
  }
  const std::ptrdiff_t n_digits = q - digits_begin;
  if (n_digits == 0 || (q < end && !is_blank(*q))) {
    out.status = NumberStatus::not_numeric;
    return out;
  }
  if (n_digits > 18) {
    // Re-parse with overflow checks; leading zeros are legal and do not overflow.
    value = 0;
    for (const char* d = digits_begin; d < q; ++d) {
      if (__builtin_mul_overflow(value, std::uint64_t{10}, &value) ||
          __builtin_add_overflow(value, static_cast<std::uint64_t>(*d - '0'), &value)) {
        out.status = NumberStatus::out_of_range;
        return out;
      }
    }
  }
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (value > limit) {
    out.status = NumberStatus::out_of_range;
    return out;
  }
  if (negative && value != 0) {
    if (!allow_negative) {
      out.status = NumberStatus::negative;
      return out;
    }
    out.value = -static_cast<std::int64_t>(value);
  } else {
    out.value = static_cast<std::int64_t>(value);
  }
  out.next = q;
  return out;
}

struct ParsedReal {
  double value = 0.0;
  const char* next = nullptr;
  NumberStatus status = NumberStatus::ok;
};

// Parses a token that must be a finite decimal floating-point number representable as a double
// (magnitudes below the double range round to zero or a subnormal, as any conversion does;
// magnitudes above it are out_of_range). Correctly rounded (std::from_chars). Values are kept in
// double whatever precision a kernel later computes in.
inline ParsedReal parse_real(const char* p, const char* end) noexcept {
  ParsedReal out;
  const char* tok_end = token_end(p, end);
  const char* q = p;
  // from_chars rejects a leading '+', which Fortran-written files sometimes carry.
  if (*q == '+' && q + 1 < tok_end && *(q + 1) != '-' && *(q + 1) != '+') ++q;
  auto [ptr, ec] = std::from_chars(q, tok_end, out.value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) {
    if (ptr != tok_end) {
      out.status = NumberStatus::not_numeric;
      return out;
    }
    // Overflow or underflow: an underflow has a negative decimal exponent.
    const char* e = q;
    while (e < tok_end && *e != 'e' && *e != 'E') ++e;
    if (!(e + 1 < tok_end && *(e + 1) == '-')) {
      out.status = NumberStatus::out_of_range;
      return out;
    }
    out.value = *q == '-' ? -0.0 : 0.0;
    out.next = tok_end;
    return out;
  }
  if (ec != std::errc{} || ptr != tok_end) {
    out.status = NumberStatus::not_numeric;
    return out;
  }
  if (!std::isfinite(out.value)) {  // "inf", "nan"
    out.status = NumberStatus::not_numeric;
    return out;
  }
  out.next = tok_end;
  return out;
}

// Number of '\n' in [p, end).
inline std::int64_t count_newlines(const char* p, const char* end) noexcept {
  return std::count(p, end, '\n');
}

// Number of lines in a text (a last line without '\n' counts).
inline std::int64_t count_lines(std::string_view text) noexcept {
  if (text.empty()) return 0;
  return count_newlines(text.data(), text.data() + text.size()) + (text.back() != '\n' ? 1 : 0);
}

}  // namespace netsparse::sparse_detail
