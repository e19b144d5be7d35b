// Small OS helpers for the local sandbox: running iproute2 programs (`ip`, `tc`) without a
// shell, and looking up network interfaces and named network namespaces.
//
// Programs are started with posix_spawn from an argv vector (never through a shell), with
// stdin on /dev/null, no inherited descriptors beyond 0-2, default signal dispositions and
// an empty signal mask. All functions are thread-safe. Interface lookups see the network
// namespace of the calling thread; namespace lookups read /run/netns (where `ip netns`
// keeps its names).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::local {

// What a finished program left behind.
struct CommandResult {
  int exit_code = 0;   // the exit status; 128 + N when it was killed by signal N
  std::string out;     // everything it wrote to stdout
  std::string err;     // everything it wrote to stderr
};

// Where FindProgram looks after $PATH.
enum class Fallback {
  kSystemDirs,  // /usr/sbin, /sbin, /usr/bin, /bin (root's tools live in sbin, which a
                // user's PATH may lack)
  kNone,        // nowhere: $PATH alone (unset: /usr/bin:/bin)
};

// The path of program `name`: `name` itself when it contains a '/', else the first
// executable regular file `<dir>/<name>` for the non-empty dirs of $PATH, then the
// fallback's. NotFound "program \"ip\" not found in ..." otherwise.
[[nodiscard]] StatusOr<std::string> FindProgram(const std::string& name,
                                                Fallback fallback = Fallback::kSystemDirs);

// The directories FindSystemProgram searches, in order.
inline constexpr const char* kSystemProgramDirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};

// The absolute path of a system program such as `ip` or `tc`: the first executable regular
// file `<dir>/<name>` for the dirs of kSystemProgramDirs, never $PATH (star local runs them
// as root, so a writable directory early on a user's PATH must not choose them).
// InvalidArgument for a name with a '/'; NotFound naming the dirs otherwise.
[[nodiscard]] StatusOr<std::string> FindSystemProgram(const std::string& name);

// Runs argv[0] with arguments argv[1..] and the caller's
// environment, and waits for it, at most `timeout` (then it is killed with SIGKILL and
// reaped). argv[0] is a path (with a '/') run as given, or a system program's name
// resolved by FindSystemProgram (never through $PATH). A non-zero exit is not an error here: see exit_code. Errors: InvalidArgument
// for an empty argv, NotFound when the program is not found, Internal when it cannot be
// started, DeadlineExceeded on timeout.
[[nodiscard]] StatusOr<CommandResult> RunCommand(
    const std::vector<std::string>& argv,
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

// RunCommand, with a non-zero exit turned into an error that names the command and
// quotes its stderr: "`ip link add stb1a2b3c type bridge` failed (exit 2): RTNETLINK
// answers: File exists". The code is FailedPrecondition when stderr says "Operation not
// permitted", else Internal.
[[nodiscard]] Status RunChecked(const std::vector<std::string>& argv);

// "ip link add x type bridge": argv joined by spaces (for messages only; not quoted).
std::string FormatCommand(const std::vector<std::string>& argv);

// Whether interface `ifname` exists in the calling thread's network namespace.
bool LinkExists(const std::string& ifname);
// The names of every interface in the calling thread's network namespace.
std::vector<std::string> ListLinks();

// Whether the named network namespace `name` exists (/run/netns/<name>).
bool NetnsExists(const std::string& name);
// The names in /run/netns (empty when the directory does not exist).
std::vector<std::string> ListNetns();
// The file `ip netns` binds namespace `name` to: "/run/netns/<name>".
std::string NetnsPath(const std::string& name);

}  // namespace star::local
