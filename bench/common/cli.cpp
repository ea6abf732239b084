#include "cli.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "matrices.hpp"

namespace netsparse::bench {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void add_matrix_options(CLI::App& app, std::string& data_dir, std::vector<std::string>& matrices) {
  data_dir = default_data_dir();
  app.add_option("--data-dir", data_dir);
  app.add_option_function<std::string>("--matrices",
                                       [&matrices](const std::string& v) { matrices = split(v); });
}

namespace {

void record_given(const CLI::App& app, CliResult& r) {
  r.given.emplace_back("--help", r.kind == CliResult::Kind::help ? "yes" : "no");
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr() || opt == app.get_help_all_ptr()) continue;
    std::string value;
    if (opt->count() == 0) {
      value = "(not given)";
    } else {
      for (const std::string& v : opt->results()) value += (value.empty() ? "" : " ") + v;
    }
    r.given.emplace_back(opt->get_name(), std::move(value));
  }
}

}  // namespace

CliResult parse_command_line(CLI::App& app, int argc, char** argv) {
  CliResult r;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    r.kind = CliResult::Kind::help;
  } catch (const CLI::CallForAllHelp&) {
    r.kind = CliResult::Kind::help;
  } catch (const CLI::ParseError& e) {
    r.kind = CliResult::Kind::error;
    r.error = e.what();
  }
  record_given(app, r);
  return r;
}

int finish_command_line(const CliResult& r, const char* program, const char* help, bool print,
                        int error_exit) {
  switch (r.kind) {
    case CliResult::Kind::run:
      return -1;
    case CliResult::Kind::help:
      if (print) std::fputs(help, stdout);
      return 0;
    case CliResult::Kind::error:
      if (print) std::fprintf(stderr, "%s: %s (see --help)\n", program, r.error.c_str());
      return error_exit;
  }
  return error_exit;
}

namespace {

[[noreturn]] void bad_list(const std::string& option, const std::string& value,
                           const std::string& want) {
  throw CLI::ValidationError(option, "needs " + want + ", got '" + value + "'");
}

}  // namespace

std::vector<long long> int_list(const std::string& option, const std::string& value, long long lo,
                                long long hi) {
  const std::string want = "a comma-separated list of integers in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]";
  std::vector<long long> out;
  for (const std::string& item : split(value)) {
    std::size_t pos = 0;
    long long x = 0;
    try {
      x = std::stoll(item, &pos);
    } catch (const std::exception&) {
      bad_list(option, value, want);
    }
    if (pos != item.size() || x < lo || x > hi) bad_list(option, value, want);
    out.push_back(x);
  }
  if (out.empty()) bad_list(option, value, want);
  return out;
}

std::vector<double> positive_list(const std::string& option, const std::string& value) {
  const std::string want = "a comma-separated list of numbers > 0";
  std::vector<double> out;
  for (const std::string& item : split(value)) {
    std::size_t pos = 0;
    double x = 0;
    try {
      x = std::stod(item, &pos);
    } catch (const std::exception&) {
      bad_list(option, value, want);
    }
    if (pos != item.size() || !(x > 0)) bad_list(option, value, want);
    out.push_back(x);
  }
  if (out.empty()) bad_list(option, value, want);
  return out;
}

std::vector<std::string> member_list(const std::string& option, const std::string& value,
                                     const std::vector<std::string>& allowed) {
  std::string names;
  for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
  std::vector<std::string> out = split(value);
  for (const std::string& item : out) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      throw CLI::ValidationError(option, "unknown item '" + item + "' (" + names + ")");
    }
  }
  if (out.empty()) bad_list(option, value, "at least one of " + names);
  return out;
}

}  // namespace netsparse::bench
