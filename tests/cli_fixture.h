// Runs the kiln binary the way users do: exit code, stdout, stderr; and a test fixture with a
// scratch folder and a check for one-line user errors. Shared by the CLI-level tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "support/file_io.h"

namespace kiln {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;
  std::string err;
};

// Runs a shell command: its exit status (-1 when a signal ended it) and stdout + stderr.
inline std::pair<int, std::string> Sh(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// Runs `kiln ARGS` through the shell; in `cwd` when given, killed after `timeout_s` seconds when
// given (exit code 128 + 9).
inline Result RunKiln(const std::string& args, const std::string& cwd = "", int timeout_s = 0) {
  static int counter = 0;
  std::string err_file = (fs::temp_directory_path() / ("kiln_cli_err_" + std::to_string(getpid()) +
                                                       "_" + std::to_string(counter++)))
                             .string();
  std::string cmd = std::string(KILN_BINARY) + " " + args + " 2>" + err_file;
  if (timeout_s > 0) cmd = "timeout -s KILL " + std::to_string(timeout_s) + " " + cmd;
  if (!cwd.empty()) cmd = "cd '" + cwd + "' && " + cmd;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto e = ReadFile(err_file);
  r.err = e.ok() ? *e : "";
  fs::remove(err_file);
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_cli_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& n) { return (dir_ / n).string(); }
  void Write(const std::string& n, const std::string& bytes) {
    ASSERT_TRUE(WriteFile(file(n), bytes).ok());
  }
  // A user error: exit code 1 and exactly one line on stderr that contains `what`.
  void ExpectUserError(const std::string& args, const std::string& what) {
    Result r = RunKiln(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  fs::path dir_;
};

}  // namespace kiln
