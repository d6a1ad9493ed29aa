/* kmirrord as a child process for end-to-end tests: start it with --set
 * keys, wait until it serves (the port file it writes in data.dir), ask
 * its status through kmirrorctl, stop it with SIGTERM or kill it with -9.
 * Every wait has a deadline and checks an observable condition. */
#ifndef KM_TESTS_E2E_DAEMON_H
#define KM_TESTS_E2E_DAEMON_H

#include <jansson.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace kmtest {

struct PartStatus {
	std::string state, reason;
	int64_t leo = -1, hw = -1, lso = -1, lag = -1, source_hw = -1;
	int64_t corrupt = 0, reconnects = 0;
	int64_t worker = -1;
	int64_t log_start = -1, disk_bytes = -1;
};

class Daemon {
public:
	/* sets: "key=value" entries; data.dir, listeners and control.socket
	 * are added unless given (a given control.socket is the one socket()
	 * names). */
	Daemon(std::string data_dir, std::vector<std::string> sets);
	~Daemon();

	std::string start(int timeout_ms = 30000);
	/* "NAME=value" entries for the next start() (test-only switches). */
	void set_env(std::vector<std::string> env) { env_ = std::move(env); }
	/* A command line kmirrord runs under at the next start() (e.g.
	 * prlimit: the child's limits), its arguments before kmirrord's. */
	void set_wrapper(std::vector<std::string> w) { wrap_ = std::move(w); }
	/* SIGTERM and wait: the exit code and output in *res. */
	std::string stop(int timeout_ms, ChildResult *res);
	/* SIGKILL and reap. */
	std::string kill9();

	uint16_t port() const { return port_; }
	std::string bootstrap() const
	{
		return "127.0.0.1:" + std::to_string(port_);
	}
	const std::string &socket() const { return socket_; }
	const std::string &data_dir() const { return dir_; }
	Child &child() { return child_; }

	/* "topic:partition" -> status, from `kmirrorctl status --json`. */
	std::string status(std::map<std::string, PartStatus> *out);
	/* Wait until pred holds for the status. */
	template <class F> std::string wait_status(F pred, int timeout_ms);

private:
	std::string dir_, socket_;
	std::vector<std::string> sets_, env_, wrap_;
	Child child_;
	uint16_t port_ = 0;
};

/* Milliseconds on the monotonic clock. */
int64_t now_ms();
/* Block until fd-less condition `pred` holds, polling it every few ms
 * (status and files have no fd to wait on). */
template <class F> bool poll_until(F pred, int timeout_ms);

} // namespace kmtest

#include "tests/e2e/daemon_impl.h"

#endif
