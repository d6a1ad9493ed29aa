#include "tests/e2e/daemon.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

namespace kmtest {

int64_t now_ms()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool has_key(const std::vector<std::string> &sets, const char *key)
{
	std::string k = std::string(key) + "=";

	for (auto &s : sets)
		if (s.compare(0, k.size(), k) == 0)
			return true;
	return false;
}

Daemon::Daemon(std::string data_dir, std::vector<std::string> sets)
	: dir_(std::move(data_dir)), socket_(dir_ + "/ctl.sock"),
	  sets_(std::move(sets))
{
	if (!has_key(sets_, "data.dir"))
		sets_.push_back("data.dir=" + dir_);
	if (!has_key(sets_, "listeners"))
		sets_.push_back("listeners=127.0.0.1:0");
	if (!has_key(sets_, "control.socket"))
		sets_.push_back("control.socket=" + socket_);
	for (auto &s : sets_)
		if (s.compare(0, 15, "control.socket=") == 0)
			socket_ = s.substr(15);
	if (!has_key(sets_, "flush.ms"))
		sets_.push_back("flush.ms=20");
	if (!has_key(sets_, "fetch.max.wait.ms"))
		sets_.push_back("fetch.max.wait.ms=50");
	/* KM_TEST_LOG_DIRECT_IO=0 runs a suite's daemons with buffered
	 * writes, as the log suites' _buffered runs do (issue 18: every test
	 * passes with log.direct.io=false too). */
	const char *dio = getenv("KM_TEST_LOG_DIRECT_IO");
	if (dio != nullptr && strcmp(dio, "0") == 0 &&
	    !has_key(sets_, "log.direct.io"))
		sets_.push_back("log.direct.io=false");
}

Daemon::~Daemon()
{
	if (child_.running())
		kill9();
}

std::string Daemon::start(int timeout_ms)
{
	const char *exe = getenv("KM_KMIRRORD");
	std::vector<std::string> argv = wrap_;

	argv.push_back(exe ? exe : "kmirrord");
	std::string port_file = dir_ + "/kmirrord.port", err;

	::remove(port_file.c_str());
	for (auto &s : sets_) {
		argv.push_back("--set");
		argv.push_back(s);
	}
	if (std::string e = child_.spawn(argv, env_); !e.empty())
		return e;
	bool up = poll_until(
		[&] {
			std::string s = read_file(port_file, &err);
			port_ = (uint16_t)atoi(s.c_str());
			return port_ != 0 || !child_.running() ||
			       child_.exited();
		},
		timeout_ms);
	if (!up || port_ == 0) {
		ChildResult res;
		child_.kill(SIGKILL);
		child_.wait(5000, &res);
		return "kmirrord did not start: " + res.describe();
	}
	return "";
}

std::string Daemon::stop(int timeout_ms, ChildResult *res)
{
	if (std::string e = child_.kill(SIGTERM); !e.empty())
		return e;
	return child_.wait(timeout_ms, res);
}

std::string Daemon::kill9()
{
	ChildResult res;

	if (std::string e = child_.kill(SIGKILL); !e.empty())
		return e;
	return child_.wait(10000, &res);
}

static int64_t jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static void fill(json_t *row, PartStatus *p)
{
	json_t *r = json_object_get(row, "reason");

	p->state = json_string_value(json_object_get(row, "state"))
			   ? json_string_value(json_object_get(row, "state"))
			   : "";
	p->reason = json_is_string(r) ? json_string_value(r) : "";
	p->leo = jint(row, "leo");
	p->hw = jint(row, "hw");
	p->lso = jint(row, "lso");
	p->lag = jint(row, "lag");
	p->source_hw = jint(row, "source_hw");
	p->corrupt = jint(row, "corrupt");
	p->reconnects = jint(row, "reconnects");
	p->worker = jint(row, "worker");
	p->log_start = jint(row, "log_start");
	p->disk_bytes = jint(row, "disk_bytes");
}

std::string Daemon::status(std::map<std::string, PartStatus> *out)
{
	const char *exe = getenv("KM_KMIRRORCTL");
	ChildResult res = run_command({ exe ? exe : "kmirrorctl", "--socket",
					socket_, "status", "--json" },
				      10000);
	json_error_t jerr;
	json_t *root, *parts, *row;
	std::string line;
	size_t i;

	/* Collect kmirrord's stderr so far (stderr_so_far()). */
	if (child_.running())
		child_.read_line(1, &line);
	if (res.exit_code != 0)
		return "kmirrorctl status: " + res.describe();
	root = json_loads(res.out.c_str(), 0, &jerr);
	if (root == nullptr)
		return std::string("kmirrorctl status: not JSON: ") + jerr.text;
	parts = json_object_get(root, "partitions");
	json_array_foreach(parts, i, row) {
		const char *name = json_string_value(json_object_get(row, "partition"));

		if (name != nullptr)
			fill(row, &(*out)[name]);
	}
	json_decref(root);
	return "";
}

} // namespace kmtest
