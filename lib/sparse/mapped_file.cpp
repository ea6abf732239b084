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

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO or pipe";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

MappedFile::MappedFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever if none
  // comes; it changes nothing for a regular file, and anything else is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ParseError(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw ParseError(path, 0, std::string("cannot stat file: ") + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ParseError(path, 0,
                     std::string("not a regular file (") + file_kind(st.st_mode) +
                         "): the readers map or measure their input, so a pipe, a "
                         "device or a directory cannot be read; copy it to a file");
  }
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
