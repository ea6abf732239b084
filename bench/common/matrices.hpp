// Where the benchmarks find the real matrices that scripts/fetch-matrices.sh downloads.
#pragma once

#include <optional>
#include <string>

namespace netsparse::bench {

// NETSPARSE_DATA_DIR, else ~/.cache/netsparse/matrices (empty when HOME is not set either).
std::string default_data_dir();

// data_dir/file when it can be read; otherwise prints one "!!! MISSING" line naming the file
// and what is skipped (`skipped`) and returns nothing.
std::optional<std::string> data_file(const std::string& data_dir, const std::string& file,
                                     const std::string& skipped);

}  // namespace netsparse::bench
