/* What the C ABI's tests (compiled as C, one executable each) share: checks
 * that count failures and say where, and kvd started as a child process
 * (NANOKV_KVD_BINARY) until its socket is there. */
#ifndef NANOKV_TESTS_UNIT_CAPI_CAPI_CHECK_H_
#define NANOKV_TESTS_UNIT_CAPI_CAPI_CHECK_H_

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nanokv/nanokv.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                                     \
  do {                                                                                                  \
    ++checks;                                                                                           \
    if (!(cond)) {                                                                                      \
      ++failures;                                                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,        \
              nanokv_last_error());                                                                     \
    }                                                                                                   \
  } while (0)

/* The call answers `code` and its message contains `text`. */
#define CHECK_FAILS(call, code, text)                                                                   \
  do {                                                                                                  \
    int got_ = (call);                                                                                  \
    ++checks;                                                                                           \
    if (got_ != (code) || strstr(nanokv_last_error(), (text)) == NULL) {                                \
      ++failures;                                                                                       \
      fprintf(stderr, "%s:%d: %s: got %d (%s) \"%s\", want %d with \"%s\"\n", __FILE__, __LINE__, #call, \
              got_, nanokv_code_name(got_), nanokv_last_error(), (code), (text));                       \
    }                                                                                                   \
  } while (0)

/* The call answers NANOKV_OK. */
#define CHECK_OK(call)                                                                                  \
  do {                                                                                                  \
    int got_ = (call);                                                                                  \
    ++checks;                                                                                           \
    if (got_ != NANOKV_OK) {                                                                            \
      ++failures;                                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, nanokv_last_error());               \
    }                                                                                                   \
  } while (0)

/* $NANOKV_KVD_BINARY, else the kvd this test was built with. */
static const char* KvdBinary(void) {
  const char* binary = getenv("NANOKV_KVD_BINARY");
  return binary != NULL && *binary != '\0' ? binary : NANOKV_KVD_BINARY;
}

/* Runs kvd with `argv` (argv[0] KvdBinary(), NULL-terminated), its stdout
 * and stderr in `log_path`; returns once `socket_path` exists. Exits 2 when
 * kvd does not come up within 20 s (or exits first). */
static pid_t SpawnKvd(char* const argv[], const char* log_path, const char* socket_path) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* log = freopen(log_path, "w", stdout);
    if (log != NULL) dup2(fileno(log), 2);
    execv(argv[0], argv);
    _exit(127);
  }
  for (int i = 0; i < 2000; ++i) { /* up to 20 s */
    if (access(socket_path, F_OK) == 0) return pid;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    usleep(10000);
  }
  fprintf(stderr, "kvd (%s) did not come up; see %s\n", argv[0], log_path);
  exit(2);
}

/* SIGTERM, and kvd must stop cleanly. */
static void StopKvdPid(pid_t pid) {
  int status = 0;
  kill(pid, SIGTERM);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#endif  /* NANOKV_TESTS_UNIT_CAPI_CAPI_CHECK_H_ */
