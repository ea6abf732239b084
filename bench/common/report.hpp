// The benchmarks' JSON results: documents built with nlohmann-json (ordered_json keeps the
// fields in the order they are set, so a file reads like the table it records), written by one
// function that says why a write failed, and a path check made before a long run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace netsparse::bench {

using Json = nlohmann::ordered_json;

// Why `path` cannot be written, or "" if it can: "--json PATH: is a directory" / ": cannot
// write: <strerror>". Opened for appending, so an existing file keeps its contents until the
// results replace it, and a file this check creates is removed again.
std::string json_path_problem(const std::string& path);

// Writes `doc` to `path` (indented by `indent` spaces, -1: one line); "" or why it failed
// ("--json PATH: cannot write: ..." / ": write failed: ...").
std::string write_json(const std::string& path, const Json& doc, int indent = 2);

// A JSON text (ns_stats_json, a file) parsed; null when `text` is empty. Throws
// std::runtime_error naming `what` when it is not JSON.
Json parse_json(const std::string& text, const std::string& what);

// The 1-minute load average (/proc/loadavg; -1 if unknown): the load the run saw.
double load_average_1min();

}  // namespace netsparse::bench
