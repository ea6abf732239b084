// The benchmarks' command lines: CLI11 parses and validates every option; each benchmark keeps
// its own hand-laid-out --help text (sections, output columns, exit codes: more than CLI11's
// generated list can say), printed when CLI11 reports that help was asked for.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

namespace netsparse::bench {

// The items of a comma-separated list, empty items dropped ("16,,128" -> {"16", "128"}).
std::vector<std::string> split(const std::string& s, char sep = ',');

// What parsing the command line found.
struct CliResult {
  enum class Kind { run, help, error } kind = Kind::run;
  std::string error;  // Kind::error: CLI11's message (names the option and the value)
  // Every option of the app, in its order, with what was given for it ("(not given)", else the
  // values joined by ' '; "--help" first, "yes" or "no"): the same entries on every rank whatever
  // argv holds, for an MPI benchmark's check that its ranks were given the same command line.
  std::vector<std::pair<std::string, std::string>> given;
};

// Parses argv with `app`; never throws and never exits (MPI benchmarks decide who prints and
// how every rank leaves).
CliResult parse_command_line(CLI::App& app, int argc, char** argv);

// The usual ending for a benchmark that is not an MPI job, or whose ranks all parse the same
// argv: prints `help` (stdout) or "<program>: <error> (see --help)" (stderr) when `print` is
// true, and returns the exit code (0 after --help, `error_exit` after a bad option), or -1 to
// go on with the run.
int finish_command_line(const CliResult& r, const char* program, const char* help, bool print,
                        int error_exit = 2);

// The options of a benchmark over named matrices: --data-dir (data_dir starts as
// default_data_dir()) and --matrices (a comma-separated list into `matrices`).
void add_matrix_options(CLI::App& app, std::string& data_dir, std::vector<std::string>& matrices);

// Option callbacks: each throws CLI::ValidationError naming the option for a bad item.
// A comma-separated list of integers in [lo, hi] (at least one).
std::vector<long long> int_list(const std::string& option, const std::string& value, long long lo,
                                long long hi);
// A comma-separated list of numbers greater than 0 (at least one).
std::vector<double> positive_list(const std::string& option, const std::string& value);
// A comma-separated list whose items are all in `allowed` (at least one).
std::vector<std::string> member_list(const std::string& option, const std::string& value,
                                     const std::vector<std::string>& allowed);

}  // namespace netsparse::bench
