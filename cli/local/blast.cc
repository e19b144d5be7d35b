#include "local/blast.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

namespace star::local {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000));
}

int Fail(const std::string& what) {
  std::cerr << "star blast: " << what << ": " << std::strerror(errno) << "\n";
  return 1;
}

// Reads and discards until the peer closes or the deadline passes.
void Drain(int fd, Clock::time_point deadline) {
  std::vector<char> buf(1 << 16);
  pollfd p{fd, POLLIN, 0};
  while (Clock::now() < deadline && ::poll(&p, 1, MillisLeft(deadline)) >= 0) {
    if (p.revents == 0) continue;
    if (::read(fd, buf.data(), buf.size()) <= 0) break;
  }
  ::close(fd);
}

bool ParseAddress(const std::string& address, sockaddr_in& out) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  out = {};
  out.sin_family = AF_INET;
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return false;
  }
  if (port < 1 || port > 65535) return false;
  out.sin_port = htons(static_cast<uint16_t>(port));
  return ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &out.sin_addr) == 1;
}

// A connected socket, retrying while nothing listens yet (the sink may start later).
int Connect(const sockaddr_in& to, Clock::time_point give_up) {
  while (true) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) return fd;
    const int e = errno;
    ::close(fd);
    errno = e;
    if ((e != ECONNREFUSED && e != ENETUNREACH) || Clock::now() >= give_up) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int RunBlastSink(int port, double seconds) {
  const Clock::time_point deadline = After(seconds);
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return Fail("socket");
  const int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(lfd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Fail("bind to port " + std::to_string(port));
  }
  if (::listen(lfd, 8) != 0) return Fail("listen");
  std::vector<std::thread> readers;
  pollfd p{lfd, POLLIN, 0};
  while (Clock::now() < deadline && ::poll(&p, 1, MillisLeft(deadline)) >= 0) {
    if (p.revents == 0) continue;
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) readers.emplace_back(Drain, fd, deadline);
  }
  ::close(lfd);
  for (std::thread& t : readers) t.join();
  return 0;
}

int RunBlastSender(const std::string& address, double seconds) {
  sockaddr_in to{};
  if (!ParseAddress(address, to)) {
    std::cerr << "star blast: --to: must be A.B.C.D:PORT, got \"" << address << "\"\n";
    return 1;
  }
  const Clock::time_point deadline = After(seconds);
  const int fd = Connect(to, std::min(deadline, After(10)));
  if (fd < 0) return Fail("connect to " + address);
  const std::vector<char> buf(1 << 16, 'x');
  pollfd p{fd, POLLOUT, 0};
  while (Clock::now() < deadline && ::poll(&p, 1, MillisLeft(deadline)) >= 0) {
    if (p.revents == 0) continue;
    if (::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) break;
  }
  ::close(fd);
  return 0;
}

}  // namespace star::local
