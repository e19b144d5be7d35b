#include "star/report/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace star::report {

int PickFreePort(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = INADDR_ANY;
  int port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace star::report

namespace star::report {

StatusOr<int> ListenOnPort(const std::string& host, int port,
                           const std::function<Status(int port)>& listen, int attempts) {
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument("port: must be in [0, 65535], got " + std::to_string(port));
  }
  std::string last_error = "no free port";
  for (int i = 0; i < (port == 0 ? attempts : 1); ++i) {
    const int p = port == 0 ? PickFreePort(host) : port;
    if (p == 0) continue;
    Status s = listen(p);
    if (s.ok()) return p;
    last_error = s.message();
  }
  return Status::Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                             last_error);
}

}  // namespace star::report
