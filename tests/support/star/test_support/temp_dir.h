// TempDir: a fresh directory for one test, removed with its contents by the destructor.
// The one copy every test target uses (star_add_test puts tests/support on the include
// path).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace star::test_support {

class TempDir {
 public:
  // Under $TMPDIR (or /tmp), named <prefix>-XXXXXX. path() is empty if it could not be made.
  explicit TempDir(const std::string& prefix = "star-test") {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace star::test_support
