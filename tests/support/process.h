/* Child processes and temporary directories for tests: run a built tool or
 * kcat with a timeout and capture what it printed, keep a server process
 * (kmirror-mock-source) running while a test talks to it, and a directory
 * that is gone when the test is.
 *
 * Every wait is bounded by a deadline and watches the process itself
 * (pidfd_open, Linux >= 5.3) and its pipes with poll(): no sleeps, no
 * SIGCHLD handler. Errors come back as text ("" = ok). No googletest here.
 */
#ifndef KM_TESTS_SUPPORT_PROCESS_H
#define KM_TESTS_SUPPORT_PROCESS_H

#include <sys/types.h>

#include <string>
#include <vector>

namespace kmtest {

/* How a child ended and what it printed. */
struct ChildResult {
	int exit_code = -1; /* exit status, or -1 if killed by a signal */
	int signal = 0;	    /* the signal that killed it, or 0 */
	bool timed_out = false; /* killed by us (SIGKILL) at the deadline */
	std::string out, err;

	/* "exit 2", "signal 9 (timed out)"... plus stderr, for messages. */
	std::string describe() const;
};

/* One child process with stdout on a pipe, stderr into an unlinked
 * file (it never blocks on a reader) and stdin on /dev/null. The destructor SIGKILLs a child still running and reaps it. */
class Child {
public:
	Child() = default;
	~Child();
	Child(const Child &) = delete;
	Child &operator=(const Child &) = delete;

	/* Start argv[0] (searched in PATH if it has no '/') with argv, in the
	 * environment of this process plus `env` ("NAME=value" entries). */
	std::string spawn(const std::vector<std::string> &argv,
			  const std::vector<std::string> &env = {});

	/* The next whole line of stdout (without '\n'), waiting at most
	 * timeout_ms; stderr is collected meanwhile. Fails if the child exits
	 * (or closes stdout) first. */
	std::string read_line(int timeout_ms, std::string *line);

	std::string kill(int sig);

	/* Wait up to timeout_ms for the child to exit, collecting its output
	 * into *res. On timeout the child is SIGKILLed and reaped, and
	 * res->timed_out is set (the return value is "" either way, unless
	 * the wait itself failed). */
	std::string wait(int timeout_ms, ChildResult *res);

	pid_t pid() const { return pid_; }
	bool running() const { return pid_ > 0; }
	/* True once the child has exited (not reaped: wait() still reports
	 * it). */
	bool exited() const;
	/* What the child wrote to stderr so far (for failure messages). */
	const std::string &stderr_so_far() const { return err_buf_; }

private:
	void drain(bool *out_eof, bool *err_eof);
	std::string reap(ChildResult *res);
	void close_fds();

	pid_t pid_ = -1;
	int pidfd_ = -1, out_ = -1, err_ = -1;
	std::string out_buf_, err_buf_;
};

/* Run argv to completion (at most timeout_ms, then SIGKILL): for kcat and
 * the built tools. */
ChildResult run_command(const std::vector<std::string> &argv, int timeout_ms,
			const std::vector<std::string> &env = {});

/* A fresh directory under $TMPDIR (else /tmp), removed with everything in
 * it on destruction. path() is "" if it could not be made (error() says
 * why). */
class TempDir {
public:
	explicit TempDir(const std::string &prefix = "km-test");
	~TempDir();
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;

	const std::string &path() const { return path_; }
	const std::string &error() const { return error_; }
	/* path() + "/" + name */
	std::string file(const std::string &name) const;

private:
	std::string path_, error_;
};

/* Wait up to timeout_ms for path to exist (inotify on its directory, so a
 * file renamed into place is seen at once). "" once it does. */
std::string wait_for_file(const std::string &path, int timeout_ms);

/* The whole content of a file; "" and *err set if it cannot be read. */
std::string read_file(const std::string &path, std::string *err = nullptr);

} // namespace kmtest

#endif
