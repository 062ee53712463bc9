#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace libra {
namespace {

/// Writes all of `text` to `fd`; 0 or the errno of the failure.
int WriteAll(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    written += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::string& text,
                           const std::string& what) {
  auto failure = [&](int error) {
    return Status::InvalidArgument(path + ": cannot write the " + what + " (" +
                                   std::strerror(error) + ")");
  };
  if (path.empty()) return Status::InvalidArgument("cannot write the " + what + " to ''");
  // What the path names now decides how it is written: a regular file (through any symbolic
  // links) or nothing is replaced atomically; anything else (a device such as /dev/null, a pipe,
  // a terminal) is written into as it is, never replaced by a file.
  std::string target = path;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return failure(EISDIR);
    if (!S_ISREG(info.st_mode)) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd < 0) return failure(errno);
      const int error = WriteAll(fd, text);
      if (::close(fd) != 0 && error == 0) return failure(errno);
      return error == 0 ? Status() : failure(error);
    }
    // Replace the file a symbolic link points to, keeping the link.
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) return failure(errno);
    target = resolved;
  } else if (errno != ENOENT) {
    return failure(errno);
  }
  const std::filesystem::path target_path(target);
  const std::filesystem::path folder =
      target_path.has_parent_path() ? target_path.parent_path() : ".";
  std::string temp = (folder / ("." + target_path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return failure(errno);
  auto abandon = [&](int error) {
    ::close(fd);
    ::unlink(temp.c_str());
    return failure(error);
  };
  // mkstemp makes the file private; give it the mode a new file would get.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return abandon(errno);
  if (const int error = WriteAll(fd, text); error != 0) return abandon(error);
  if (::fsync(fd) != 0) return abandon(errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return failure(error);
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return failure(error);
  }
  return Status();
}

Result<std::string> ReadFileBounded(const std::string& path, size_t max_bytes,
                                    const std::string& what) {
  auto failure = [&](int error) {
    return Status::NotFound(path + ": cannot read the " + what + " (" + std::strerror(error) + ")");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure(errno);
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= max_bytes) {
    const size_t want = std::min(sizeof(buffer), max_bytes + 1 - text.size());
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return failure(error);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (text.size() > max_bytes) {
    return Status::InvalidArgument(StrFormat("%s: the %s is larger than libra's limit of %zu bytes",
                                             path.c_str(), what.c_str(), max_bytes));
  }
  return text;
}

Status ClaimFolder(const std::string& dir, const std::string& owner) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument(dir + ": cannot create the folder (" + ec.message() + ")");
  const std::string path = (std::filesystem::path(dir) / ".owner").string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno != ENOENT) {
      return Status::InvalidArgument(path + ": cannot read (" + std::strerror(errno) + ")");
    }
    return WriteFileAtomically(path, owner + "\n", "owner of the folder");
  }
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0 && text.size() < 65536) {
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text == owner) return Status();
  return Status::InvalidArgument(dir + " holds the files of " + text + ", not of " + owner +
                                 "; libra will not use or overwrite them");
}

bool IsPlainFileName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::vector<std::string> ProcessStatFields(int64_t pid) {
  std::vector<std::string> fields;
  const int fd = open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fields;
  char buffer[1024];
  ssize_t n = 0;
  while ((n = read(fd, buffer, sizeof(buffer))) < 0 && errno == EINTR) {
  }
  close(fd);
  const std::string_view stat(buffer, static_cast<size_t>(std::max<ssize_t>(0, n)));
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return fields;
  std::string_view rest = stat.substr(paren + 1);
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.remove_suffix(1);
  for (std::string& field : StrSplit(rest, ' ')) {
    if (!field.empty()) fields.push_back(std::move(field));
  }
  return fields;
}

}  // namespace libra
