#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <deque>
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

namespace cli {

struct App::Impl {
  explicit Impl(const std::string& description) : app(description) {}
  CLI::App app;
  std::deque<Option> options;  // stable addresses: add_* return pointers into it

  Option* wrap(CLI::Option* opt) {
    options.push_back(Option(opt));
    return &options.back();
  }
};

namespace {

CLI::Option* raw(void* opt) {
  return static_cast<CLI::Option*>(opt);
}

// Runs an option's callback, turning the benchmarks' ValidationError into CLI11's (so the
// message reads as CLI11's own validation errors do).
template <class F>
void reported(F&& f) {
  try {
    f();
  } catch (const ValidationError& e) {
    throw CLI::ValidationError(e.option(), e.what());
  }
}

}  // namespace

Option* Option::check(const Range& r) {
  CLI::Option* o = raw(opt_);
  switch (r.kind()) {
    case Range::Kind::int_:
      o->check(CLI::Range(static_cast<int>(r.lo()), static_cast<int>(r.hi())));
      break;
    case Range::Kind::long_:
      o->check(CLI::Range(static_cast<long>(r.lo()), static_cast<long>(r.hi())));
      break;
    case Range::Kind::long_long:
      o->check(CLI::Range(r.lo(), r.hi()));
      break;
    case Range::Kind::unsigned_:
      o->check(CLI::Range(static_cast<unsigned>(r.unsigned_lo()),
                          static_cast<unsigned>(r.unsigned_hi())));
      break;
    case Range::Kind::unsigned_long:
      o->check(CLI::Range(static_cast<unsigned long>(r.unsigned_lo()),
                          static_cast<unsigned long>(r.unsigned_hi())));
      break;
    case Range::Kind::unsigned_long_long:
      o->check(CLI::Range(r.unsigned_lo(), r.unsigned_hi()));
      break;
    case Range::Kind::real:
      o->check(CLI::Range(r.real_lo(), r.real_hi()));
      break;
  }
  return this;
}

Option* Option::check(const IsMember& m) {
  raw(opt_)->check(CLI::IsMember(m.names));
  return this;
}

Option* Option::check(std::function<std::string(const std::string&)> validator) {
  raw(opt_)->check(std::move(validator));
  return this;
}

App::App(const std::string& description) : impl_(std::make_unique<Impl>(description)) {}
App::~App() = default;

void App::set_help_flag(const std::string& names) {
  impl_->app.set_help_flag(names);
}

template <class T>
Option* App::add_option(const std::string& names, T& target, const std::string& description) {
  return impl_->wrap(impl_->app.add_option(names, target, description));
}

template <class T>
Option* App::add_option_function(const std::string& names, std::function<void(const T&)> callback,
                                 const std::string& description) {
  return impl_->wrap(impl_->app.add_option_function<T>(
      names, [cb = std::move(callback)](const T& v) { reported([&] { cb(v); }); }, description));
}

Option* App::add_flag(const std::string& names, bool& target, const std::string& description) {
  return impl_->wrap(impl_->app.add_flag(names, target, description));
}

Option* App::add_flag(const std::string& names) {
  return impl_->wrap(impl_->app.add_flag(names));
}

Option* App::add_flag_callback(const std::string& names, std::function<void()> callback,
                               const std::string& description) {
  return impl_->wrap(impl_->app.add_flag_callback(
      names, [cb = std::move(callback)] { reported(cb); }, description));
}

std::string App::help() const {
  return impl_->app.help();
}

namespace {

// CliResult::given: every option of `app` with what was given for it.
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

CliResult App::parse(int argc, char** argv) {
  CliResult r;
  try {
    impl_->app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    r.kind = CliResult::Kind::help;
  } catch (const CLI::CallForAllHelp&) {
    r.kind = CliResult::Kind::help;
  } catch (const CLI::ParseError& e) {
    r.kind = CliResult::Kind::error;
    r.error = e.what();
  }
  record_given(impl_->app, r);
  return r;
}

// The option types the benchmarks declare.
#define NETSPARSE_CLI_TYPE(T)                                                                     \
  template Option* App::add_option<T>(const std::string&, T&, const std::string&);                \
  template Option* App::add_option_function<T>(const std::string&, std::function<void(const T&)>, \
                                               const std::string&);
NETSPARSE_CLI_TYPE(int)
NETSPARSE_CLI_TYPE(long)
NETSPARSE_CLI_TYPE(long long)
NETSPARSE_CLI_TYPE(unsigned)
NETSPARSE_CLI_TYPE(unsigned long)
NETSPARSE_CLI_TYPE(unsigned long long)
NETSPARSE_CLI_TYPE(double)
NETSPARSE_CLI_TYPE(std::string)
#undef NETSPARSE_CLI_TYPE

}  // namespace cli

void add_matrix_options(cli::App& app, std::string& data_dir, std::vector<std::string>& matrices) {
  data_dir = default_data_dir();
  app.add_option("--data-dir", data_dir);
  app.add_option_function<std::string>("--matrices",
                                       [&matrices](const std::string& v) { matrices = split(v); });
}

CliResult parse_command_line(cli::App& app, int argc, char** argv) {
  return app.parse(argc, argv);
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
  throw cli::ValidationError(option, "needs " + want + ", got '" + value + "'");
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
      throw cli::ValidationError(option, "unknown item '" + item + "' (" + names + ")");
    }
  }
  if (out.empty()) bad_list(option, value, "at least one of " + names);
  return out;
}

}  // namespace netsparse::bench
