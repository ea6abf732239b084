#include "report.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace netsparse::bench {

std::string json_path_problem(const std::string& path) {
  struct stat st {};
  const bool existed = stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) return "--json " + path + ": is a directory";
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return "--json " + path + ": cannot write: " + std::strerror(errno);
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
  return "";
}

std::string write_json(const std::string& path, const Json& doc, int indent) {
  // Invalid UTF-8 (a matrix file name, say) is replaced rather than failing the whole report.
  const std::string text = doc.dump(indent, ' ', false, Json::error_handler_t::replace) + "\n";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "--json " + path + ": cannot write: " + std::strerror(errno);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    return "--json " + path + ": write failed: " + std::strerror(ok ? errno : err);
  }
  return "";
}

Json parse_json(const std::string& text, const std::string& what) {
  if (text.empty()) return nullptr;
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw std::runtime_error(what + " is not JSON: " + e.what());
  }
}

double load_average_1min() {
  double load = -1.0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1.0;
    std::fclose(f);
  }
  return load;
}

}  // namespace netsparse::bench
