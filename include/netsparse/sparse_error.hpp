// The error every NetSparse file reader throws for malformed or unreadable input.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace netsparse {

// what() is "FILE:LINE: reason", the form compilers use, so editors can jump to the spot.
// LINE is 1-based; 0 means the error concerns the file as a whole (e.g. it cannot be opened),
// and what() is then "FILE: reason" (line() still returns 0).
class ParseError : public std::runtime_error {
 public:
  ParseError(std::string file, std::int64_t line, std::string reason)
      : std::runtime_error(message(file, line, reason)),
        file_(std::move(file)),
        line_(line),
        reason_(std::move(reason)) {}

  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] std::int64_t line() const noexcept { return line_; }
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  static std::string message(const std::string& file, std::int64_t line,
                             const std::string& reason) {
    std::string m = file;
    if (line > 0) {
      m += ':';
      m += std::to_string(line);
    }
    m += ": ";
    m += reason;
    return m;
  }

  std::string file_;
  std::int64_t line_;
  std::string reason_;
};

}  // namespace netsparse
