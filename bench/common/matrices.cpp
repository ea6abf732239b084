#include "matrices.hpp"

#include <cstdio>
#include <fstream>

#include "config/settings.hpp"

namespace netsparse::bench {

std::string default_data_dir() {
  if (config::is_set(config::Env::kDataDir)) return config::text(config::Env::kDataDir);
  if (const char* home = config::foreign("HOME")) {
    return std::string(home) + "/.cache/netsparse/matrices";
  }
  return {};
}

std::optional<std::string> data_file(const std::string& data_dir, const std::string& file,
                                     const std::string& skipped) {
  const std::string path = data_dir + "/" + file;
  if (std::ifstream(path)) return path;
  std::printf(
      "!!! MISSING %s: run scripts/fetch-matrices.sh (or set NETSPARSE_DATA_DIR); skipping %s\n",
      path.c_str(), skipped.c_str());
  return std::nullopt;
}

}  // namespace netsparse::bench
