#include "config/settings.hpp"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string_view>

namespace netsparse::config {

namespace {

// "1e9" -> "1000000000": ranges are stored as doubles but read as integers.
std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  if (std::fabs(v) < 1e18 && v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  }
  return buf;
}

[[noreturn]] void refuse(const Setting& s, const char* value, const std::string& accepted) {
  throw std::invalid_argument(std::string("environment variable ") + s.name + "='" + value +
                              "' is not " + accepted);
}

std::string accepted_text(const Setting& s) {
  switch (s.type) {
    case Type::kChoice: {
      std::string list;
      for (std::string_view rest = s.choices; !rest.empty();) {
        const auto bar = rest.find('|');
        list += (list.empty() ? "" : ", ") + std::string(rest.substr(0, bar));
        rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
      }
      return "one of " + list;
    }
    case Type::kInteger:
      return "an integer in [" + number_text(s.lo) + ", " + number_text(s.hi) + "]";
    case Type::kReal:
      return "a number in (" + number_text(s.lo) + ", " + number_text(s.hi) + "]";
    case Type::kText:
      return "text";
  }
  return "valid";
}

bool is_choice(const Setting& s, std::string_view value) {
  for (std::string_view rest = s.choices; !rest.empty();) {
    const auto bar = rest.find('|');
    if (rest.substr(0, bar) == value) return true;
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  return false;
}

long long parse_integer(const Setting& s, const char* value) {
  // strtoll alone accepts leading blanks, '+' and a trailing rest: a setting must be exact.
  const std::string_view v = value;
  const bool starts_ok =
      !v.empty() &&
      ((v[0] >= '0' && v[0] <= '9') || (v[0] == '-' && v.size() > 1 && v[1] >= '0' && v[1] <= '9'));
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(value, &end, 10);
  if (!starts_ok || *end != '\0' || errno == ERANGE || static_cast<double>(n) < s.lo ||
      static_cast<double>(n) > s.hi) {
    refuse(s, value, accepted_text(s));
  }
  return n;
}

double parse_real(const Setting& s, const char* value) {
  const std::string_view v = value;
  const bool starts_ok = !v.empty() && ((v[0] >= '0' && v[0] <= '9') || v[0] == '.' || v[0] == '-');
  char* end = nullptr;
  const double x = std::strtod(value, &end);
  if (!starts_ok || *end != '\0' || !std::isfinite(x) || !(x > s.lo) || x > s.hi) {
    refuse(s, value, accepted_text(s));
  }
  return x;
}

const Setting& expect(Env e, Type t) {
  const Setting& s = setting(e);
  if (s.type != t) throw std::logic_error(std::string("config: ") + s.name + " read as wrong type");
  return s;
}

}  // namespace

const char* raw(Env e) {
  const char* v = std::getenv(setting(e).name);
  return (v != nullptr && v[0] != '\0') ? v : nullptr;
}

bool is_set(Env e) {
  return raw(e) != nullptr;
}

std::string choice(Env e) {
  const Setting& s = expect(e, Type::kChoice);
  const char* v = raw(e);
  if (v == nullptr) return s.default_text;
  if (!is_choice(s, v)) refuse(s, v, accepted_text(s));
  return v;
}

long long integer(Env e) {
  const Setting& s = expect(e, Type::kInteger);
  const char* v = raw(e);
  if (v == nullptr)
    return s.default_text[0] != '\0' ? std::strtoll(s.default_text, nullptr, 10) : 0;
  return parse_integer(s, v);
}

double real(Env e) {
  const Setting& s = expect(e, Type::kReal);
  const char* v = raw(e);
  if (v == nullptr) return std::strtod(s.default_text, nullptr);
  return parse_real(s, v);
}

std::string text(Env e) {
  const Setting& s = expect(e, Type::kText);
  const char* v = raw(e);
  return v != nullptr ? v : s.default_text;
}

std::string effective(Env e) {
  const Setting& s = setting(e);
  if (raw(e) == nullptr) return s.default_text;
  switch (s.type) {
    case Type::kChoice:
      return choice(e);
    case Type::kInteger:
      return std::to_string(integer(e));
    case Type::kReal:
      (void)real(e);
      return raw(e);
    case Type::kText:
      return text(e);
  }
  return raw(e);
}

std::string first_error(Scope scope) {
  for (int i = 0; i < static_cast<int>(Env::kCount); ++i) {
    const auto e = static_cast<Env>(i);
    if (setting(e).scope != scope) continue;
    try {
      (void)effective(e);
    } catch (const std::invalid_argument& err) {
      return err.what();
    }
  }
  return {};
}

std::vector<std::pair<const char*, std::string>> agreed_values() {
  std::vector<std::pair<const char*, std::string>> out;
  for (int i = 0; i < static_cast<int>(Env::kCount); ++i) {
    const auto e = static_cast<Env>(i);
    if (setting(e).agreed) out.emplace_back(setting(e).name, effective(e));
  }
  return out;
}

std::vector<std::string> agreed_names() {
  std::vector<std::string> out;
  for (const Setting& s : kEnvironment)
    if (s.agreed) out.emplace_back(s.name);
  return out;
}

namespace {

// NETSPARSE_* names that the project's scripts and test harnesses read, not the library.
constexpr std::string_view kScriptPrefixes[] = {"NETSPARSE_TEST_", "NETSPARSE_VM_",
                                                "NETSPARSE_FUZZ_"};
constexpr std::string_view kScriptNames[] = {"NETSPARSE_JOBS",          "NETSPARSE_SKIP_VM",
                                             "NETSPARSE_DEBIAN_MIRROR", "NETSPARSE_REQUIRE_VERBS",
                                             "NETSPARSE_VERBS_DEVICE",  "NETSPARSE_NP",
                                             "NETSPARSE_MATRIX_DIR",    "NETSPARSE_TASKSET"};

// Levenshtein distance (insertions, deletions, substitutions), one row at a time.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> unknown_names() {
  std::vector<std::string> out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    if (!name.starts_with("NETSPARSE_")) continue;
    const auto is = [&](std::string_view n) { return n == name; };
    const auto under = [&](std::string_view p) { return name.starts_with(p); };
    if (std::any_of(std::begin(kEnvironment), std::end(kEnvironment),
                    [&](const Setting& s) { return is(s.name); }) ||
        std::any_of(std::begin(kScriptNames), std::end(kScriptNames), is) ||
        std::any_of(std::begin(kScriptPrefixes), std::end(kScriptPrefixes), under)) {
      continue;
    }
    std::string line = std::string(name) + " is set but is not a NetSparse setting";
    const Setting* nearest = nullptr;
    std::size_t best = name.size();
    for (const Setting& s : kEnvironment) {
      const std::size_t d = edit_distance(name, s.name);
      if (d < best) best = d, nearest = &s;
    }
    // A few edits: a typo (NETSPARSE_RANKS_PER_HSOT is 2 from NETSPARSE_RANKS_PER_HOST).
    if (nearest != nullptr && best <= std::max<std::size_t>(2, name.size() / 6)) {
      line += std::string(" (did you mean ") + nearest->name + "?)";
    }
    out.push_back(std::move(line));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void warn_unknown_names_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& line : unknown_names()) {
      std::fprintf(stderr, "netsparse: warning: %s\n", line.c_str());
    }
  });
}

const char* foreign(const char* name) {
  return std::getenv(name);
}

}  // namespace netsparse::config
