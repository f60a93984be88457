// Running a command the way a user does, in a process of its own, for the tests that drive the
// `baton` CLI or re-execute their own binary.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace baton::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the command could not be started or was killed by a signal
  std::string output;  // what the command printed (whatever `command` redirects)
};

// `command` through the shell (popen); its exit code and standard output.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace baton::testing
