#include "sparse/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "netsparse/sparse_error.hpp"

namespace netsparse::sparse_detail {

namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ParseError(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw ParseError(path, 0, std::string("cannot stat file: ") + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw ParseError(path, 0, "not a regular file");
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    throw ParseError(path, 0, std::string("cannot map file: ") + std::strerror(errno));
  }
  data_ = map;
  // Parsers stream through their byte ranges once: ask for aggressive read-ahead. (Not
  // MADV_WILLNEED: a rank of a distributed reader touches only its own range of the file.)
  ::madvise(data_, size_, MADV_SEQUENTIAL);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace netsparse::sparse_detail
