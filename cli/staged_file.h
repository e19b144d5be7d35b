// An output file that appears only when the command that writes it succeeds: the text goes
// to PATH.partial, and Commit() renames it to PATH; a StagedFile destroyed uncommitted
// removes PATH.partial, so a command that fails part-way leaves PATH as it was.
#pragma once

#include <fstream>
#include <string>

#include "star/core/status.h"

namespace star::cli {

class StagedFile {
 public:
  StagedFile() = default;
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();

  // Opens PATH.partial for the output flag `flag` (nothing when `path` is empty). Errors
  // name the flag and PATH: "--trace: cannot write \"out/t.csv\"".
  Status Open(const std::string& flag, const std::string& path);
  bool is_open() const { return stream_.is_open(); }
  std::ofstream& stream() { return stream_; }

  // Closes the stream and checks that everything was written (PATH.partial is removed
  // when not). Nothing to do when it is not open.
  Status Close();
  // Close(), then renames PATH.partial to PATH. Nothing to do when never opened. Closing
  // every output before committing any keeps a failed write from leaving one of them.
  Status Commit();

 private:
  std::string flag_, path_;
  std::ofstream stream_;
  bool written_ = false;  // closed with everything written, not yet renamed
};

}  // namespace star::cli
