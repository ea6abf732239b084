// A read-only memory mapping of a whole file (internal to the sparse component).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace netsparse::sparse_detail {

// Maps the file read-only for the object's lifetime. An empty file maps to an empty view.
// Throws ParseError(path, 0, reason) if the file cannot be opened, is not a regular file, or
// cannot be mapped.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  [[nodiscard]] std::string_view bytes() const noexcept {
    return {static_cast<const char*>(data_), size_};
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace netsparse::sparse_detail
