// The benchmarks' command lines: CLI11 parses and validates every option; each benchmark keeps
// its own hand-laid-out --help text (sections, output columns, exit codes: more than CLI11's
// generated list can say), printed when CLI11 reports that help was asked for.
//
// CLI11 (2.1, Debian's header-only package) is compiled once, in cli.cpp: the benchmarks see the
// small `cli` interface below instead of <CLI/CLI.hpp>. Including CLI11 cost every benchmark's
// translation unit about 10 s of CPU at -O3 even with no option declared (its validators are
// namespace-scope objects that every TU constructs and compiles), 14 TUs in all: more than a
// tenth of the release build. The interface mirrors the part of CLI11 the benchmarks use
// (App, add_option, add_option_function, add_flag, check with Range or IsMember,
// ValidationError), with CLI11's own messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace netsparse::bench {

// What parsing the command line found.
struct CliResult {
  enum class Kind { run, help, error } kind = Kind::run;
  std::string error;  // Kind::error: CLI11's message (names the option and the value)
  // Every option of the app, in its order, with what was given for it ("(not given)", else the
  // values joined by ' '; "--help" first, "yes" or "no"): the same entries on every rank whatever
  // argv holds, for an MPI benchmark's check that its ranks were given the same command line.
  std::vector<std::pair<std::string, std::string>> given;
};

namespace cli {

// Thrown by an option's callback for a bad value; reported as CLI11 reports its own
// validation errors ("<option>: <message>").
class ValidationError : public std::runtime_error {
 public:
  ValidationError(std::string option, const std::string& message)
      : std::runtime_error(message), option_(std::move(option)) {}
  const std::string& option() const { return option_; }

 private:
  std::string option_;
};

// A closed numeric range [lo, hi], of the type of its bounds (CLI11's message prints them so).
class Range {
 public:
  enum class Kind { int_, long_, long_long, unsigned_, unsigned_long, unsigned_long_long, real };
  Range(int lo, int hi) : kind_(Kind::int_), lo_(lo), hi_(hi) {}
  Range(long lo, long hi) : kind_(Kind::long_), lo_(lo), hi_(hi) {}
  Range(long long lo, long long hi) : kind_(Kind::long_long), lo_(lo), hi_(hi) {}
  Range(unsigned lo, unsigned hi) : kind_(Kind::unsigned_), ulo_(lo), uhi_(hi) {}
  Range(unsigned long lo, unsigned long hi) : kind_(Kind::unsigned_long), ulo_(lo), uhi_(hi) {}
  Range(unsigned long long lo, unsigned long long hi)
      : kind_(Kind::unsigned_long_long), ulo_(lo), uhi_(hi) {}
  Range(double lo, double hi) : kind_(Kind::real), dlo_(lo), dhi_(hi) {}
  Kind kind() const { return kind_; }
  long long lo() const { return lo_; }
  long long hi() const { return hi_; }
  unsigned long long unsigned_lo() const { return ulo_; }
  unsigned long long unsigned_hi() const { return uhi_; }
  double real_lo() const { return dlo_; }
  double real_hi() const { return dhi_; }

 private:
  Kind kind_;
  long long lo_ = 0, hi_ = 0;
  unsigned long long ulo_ = 0, uhi_ = 0;
  double dlo_ = 0, dhi_ = 0;
};

// The value must be one of `names`.
struct IsMember {
  explicit IsMember(std::vector<std::string> names) : names(std::move(names)) {}
  std::vector<std::string> names;
};

// One declared option; check() adds a validator (returns itself, for chaining).
class Option {
 public:
  Option* check(const Range& range);
  Option* check(const IsMember& member);
  // A validator of the value's text: returns "" to accept, else what is wrong.
  Option* check(std::function<std::string(const std::string&)> validator);

 private:
  friend class App;
  explicit Option(void* opt) : opt_(opt) {}
  void* opt_;  // the CLI::Option (opaque here: only cli.cpp sees CLI11)
};

// A command line. The add_* templates are compiled in cli.cpp for the option types the
// benchmarks use (int, long, long long, their unsigned forms, double, std::string).
class App {
 public:
  explicit App(const std::string& description = "");
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  void set_help_flag(const std::string& names);
  template <class T>
  Option* add_option(const std::string& names, T& target, const std::string& description = "");
  template <class T>
  Option* add_option_function(const std::string& names, std::function<void(const T&)> callback,
                              const std::string& description = "");
  Option* add_flag(const std::string& names, bool& target, const std::string& description = "");
  Option* add_flag(const std::string& names);  // accepted and ignored (read elsewhere)
  Option* add_flag_callback(const std::string& names, std::function<void()> callback,
                            const std::string& description = "");
  std::string help() const;
  // Parses argv; never throws (see parse_command_line).
  CliResult parse(int argc, char** argv);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cli

// The items of a comma-separated list, empty items dropped ("16,,128" -> {"16", "128"}).
std::vector<std::string> split(const std::string& s, char sep = ',');

// Parses argv with `app`; never throws and never exits (MPI benchmarks decide who prints and
// how every rank leaves).
CliResult parse_command_line(cli::App& app, int argc, char** argv);

// The usual ending for a benchmark that is not an MPI job, or whose ranks all parse the same
// argv: prints `help` (stdout) or "<program>: <error> (see --help)" (stderr) when `print` is
// true, and returns the exit code (0 after --help, `error_exit` after a bad option), or -1 to
// go on with the run.
int finish_command_line(const CliResult& r, const char* program, const char* help, bool print,
                        int error_exit = 2);

// The options of a benchmark over named matrices: --data-dir (data_dir starts as
// default_data_dir()) and --matrices (a comma-separated list into `matrices`).
void add_matrix_options(cli::App& app, std::string& data_dir, std::vector<std::string>& matrices);

// Option callbacks: each throws cli::ValidationError naming the option for a bad item.
// A comma-separated list of integers in [lo, hi] (at least one).
std::vector<long long> int_list(const std::string& option, const std::string& value, long long lo,
                                long long hi);
// A comma-separated list of numbers greater than 0 (at least one).
std::vector<double> positive_list(const std::string& option, const std::string& value);
// A comma-separated list whose items are all in `allowed` (at least one).
std::vector<std::string> member_list(const std::string& option, const std::string& value,
                                     const std::vector<std::string>& allowed);

}  // namespace netsparse::bench
