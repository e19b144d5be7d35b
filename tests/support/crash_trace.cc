// Linked into every test executable: a test that crashes (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL) prints the crashing thread's stack to stderr before dying of the signal, so a
// crash seen once in a ctest log can be traced. Not under ASan, whose own report is
// better (its handler stays).
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace {

#if !defined(__SANITIZE_ADDRESS__)
void PrintStackAndDie(int sig) {
  // Only async-signal-safe calls: write, backtrace (its first call is made at start-up),
  // backtrace_symbols_fd, raise.
  const char* name = strsignal(sig);
  const char head[] = "\n*** fatal signal: ";
  (void)!write(STDERR_FILENO, head, sizeof(head) - 1);
  (void)!write(STDERR_FILENO, name, std::strlen(name));
  (void)!write(STDERR_FILENO, "; stack:\n", 9);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  raise(sig);  // the handler was reset: the default action ends the process
}

const bool kInstalled = [] {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_handler = PrintStackAndDie;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
  return true;
}();
#endif

}  // namespace
