#include "support/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace kiln {

Expected<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(path + ": not a regular file");
  }
  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Error(path + ": cannot map: " + std::strerror(errno));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->mapped_ = true;
  }
  ::close(fd);
  return file;
}

std::shared_ptr<MappedFile> MappedFile::FromBytes(std::string bytes, std::string label) {
  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->owned_ = std::move(bytes);
  file->data_ = reinterpret_cast<const uint8_t*>(file->owned_.data());
  file->size_ = file->owned_.size();
  file->path_ = std::move(label);
  return file;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Expected<std::string> ReadFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

Status WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error(path + ": cannot open for writing");
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) return Error(path + ": write failed");
  return OkStatus();
}

}  // namespace kiln
