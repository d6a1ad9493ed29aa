/* Helpers shared by the failover and failback suites: cluster ids, the
 * dump tool, kmirrorctl, an idempotent producer spec. */
#ifndef KM_TESTS_E2E_E2E_UTIL_H
#define KM_TESTS_E2E_E2E_UTIL_H

#include <jansson.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/daemon.h"
#include "tests/support/kafka_peers.h"

namespace kmtest {

inline std::string cluster_id_of(const std::string &data_dir)
{
	std::string s = read_file(data_dir + "/meta.properties");
	std::smatch m;
	std::regex re("cluster\\.id=([A-Za-z0-9_.-]+)");

	return std::regex_search(s, m, re) ? m[1].str() : "";
}

inline std::string dump(const std::string &log_file)
{
	const char *exe = getenv("KM_DUMP_LOG");
	ChildResult r = run_command({ exe ? exe : "kmirror-dump-log", "--deep",
				      log_file },
				    30000);
	return r.exit_code == 0 ? r.out : "dump failed: " + r.describe();
}

/* Bytes an unprivileged writer may still use on path's filesystem. */
inline uint64_t free_bytes(const std::string &path)
{
	struct statvfs sv;
	return statvfs(path.c_str(), &sv) == 0
		       ? (uint64_t)sv.f_bavail * sv.f_frsize
		       : 0;
}

/* Leave `leave` bytes free on the filesystem of file (blocks allocated). */
inline std::string fill_to(const std::string &file, uint64_t leave)
{
	uint64_t free = free_bytes(file.substr(0, file.rfind('/')));
	int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);

	if (fd < 0 || free <= leave) {
		if (fd >= 0)
			close(fd);
		return "cannot fill " + file;
	}
	int rc = posix_fallocate(fd, 0, (off_t)(free - leave));
	close(fd);
	return rc == 0 ? "" : "fallocate " + file + ": " + strerror(rc);
}

/* A tmpfs of its own, so that the test controls free space. */
class Tmpfs {
public:
	Tmpfs(const std::string &path, const std::string &size) : path_(path)
	{
		mkdir(path.c_str(), 0700);
		ChildResult r = run_command({ "mount", "-t", "tmpfs", "-o",
					      "size=" + size, "tmpfs", path },
					    10000);
		if (r.exit_code != 0)
			error_ = "mount tmpfs: " + r.describe();
	}
	~Tmpfs()
	{
		if (error_.empty())
			run_command({ "umount", "-l", path_ }, 10000);
	}
	const std::string &error() const { return error_; }
	/* `mount -o remount,size=...`: the space comes back under kmirrord. */
	std::string grow(const std::string &size)
	{
		ChildResult r = run_command({ "mount", "-o", "remount,size=" + size,
					      path_ },
					    10000);
		return r.exit_code == 0 ? "" : "remount: " + r.describe();
	}
	/* Leave `leave` bytes free (a file takes the rest, blocks allocated). */
	std::string fill_to(uint64_t leave)
	{
		return kmtest::fill_to(path_ + "/filler", leave);
	}

private:
	std::string path_, error_;
};

/* One batch line of kmirror-dump-log. */
struct Dumped {
	int64_t base, last;
	bool valid;
};

/* Every batch of the .log segments in dir, in order, as kmirror-dump-log
 * reads them; *tail: its output up to "invalid bytes" if it found a torn
 * tail, else "". */
inline std::vector<Dumped> dump_batches(const std::string &dir,
					std::string *tail)
{
	const char *exe = getenv("KM_DUMP_LOG");
	std::vector<std::string> argv = { exe ? exe : "kmirror-dump-log" };
	std::set<std::string> logs;
	std::vector<Dumped> out;
	DIR *dh = opendir(dir.c_str());
	struct dirent *e;

	while (dh && (e = readdir(dh)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() > 4 && n.compare(n.size() - 4, 4, ".log") == 0)
			logs.insert(dir + "/" + n);
	}
	if (dh)
		closedir(dh);
	argv.insert(argv.end(), logs.begin(), logs.end());
	ChildResult r = run_command(argv, 30000);
	if (r.exit_code != 0)
		*tail = "dump failed: " + r.describe();
	std::regex re("baseOffset: (-?[0-9]+) lastOffset: (-?[0-9]+) .* "
		      "isvalid: (true|false)");
	for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), z;
	     it != z; ++it)
		out.push_back({ std::stoll((*it)[1]), std::stoll((*it)[2]),
				(*it)[3] == "true" });
	size_t f = r.out.find("invalid bytes");
	if (r.exit_code == 0)
		*tail = f == std::string::npos ? "" : r.out.substr(0, f);
	return out;
}

inline std::vector<int64_t> pids_in(const std::string &text)
{
	std::vector<int64_t> v;
	std::regex re("producerId: (-?[0-9]+)");

	for (std::sregex_iterator it(text.begin(), text.end(), re), end;
	     it != end; ++it)
		v.push_back(std::stoll((*it)[1]));
	return v;
}

inline std::string ctl(const Daemon &d, const std::vector<std::string> &args,
		ChildResult *out)
{
	const char *exe = getenv("KM_KMIRRORCTL");
	std::vector<std::string> argv = { exe ? exe : "kmirrorctl", "--socket",
					  d.socket() };

	argv.insert(argv.end(), args.begin(), args.end());
	*out = run_command(argv, 60000);
	return out->exit_code == 0 ? "" : out->describe();
}

/* The bound port of the first listener whose protocol starts with
 * `protocol` ("SASL_" for either SASL one), from status --json's
 * "listeners" rows. */
inline std::string listener_port(const Daemon &d, const std::string &protocol,
				 uint16_t *port)
{
	ChildResult r;
	json_error_t e;
	json_t *root, *row;
	size_t i;

	*port = 0;
	if (ctl(d, { "status", "--json" }, &r) != "" ||
	    (root = json_loads(r.out.c_str(), 0, &e)) == nullptr)
		return "status: " + r.describe() + r.err;
	json_array_foreach(json_object_get(root, "listeners"), i, row) {
		const char *p = json_string_value(json_object_get(row, "protocol"));
		if (*port == 0 && p != nullptr && std::string(p).rfind(protocol, 0) == 0)
			*port = (uint16_t)json_integer_value(json_object_get(row, "port"));
	}
	json_decref(root);
	return *port != 0 ? "" : "no " + protocol + " listener in: " + r.out;
}

/* What librdkafka reports when it cannot log in (its error callback, the
 * words kcat prints), or "" if nothing went wrong within 5 s. A producer
 * connects to its bootstrap server at once. */
inline std::string rdk_login_error(const std::string &bootstrap, const Props &p)
{
	static std::string first;
	std::string err;
	Props props = p;
	props.push_back({ "bootstrap.servers", bootstrap });
	first.clear();
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER, props, &err, [](rd_kafka_conf_t *c) {
		rd_kafka_conf_set_error_cb(c, [](rd_kafka_t *, int, const char *reason, void *) {
			if (first.empty())
				first = reason;
		});
	});
	if (rk == nullptr)
		return "client_new: " + err;
	poll_until([&] { rd_kafka_poll(rk, 50); return !first.empty(); }, 5000);
	rd_kafka_destroy(rk);
	return first;
}

/* kmirror-users with `input` (the password) on its standard input. */
inline ChildResult kmirror_users(const std::vector<std::string> &args,
				 const std::string &input)
{
	const char *exe = getenv("KM_KMIRROR_USERS");
	std::string cmd = std::string("printf '%s\\n' '") + input + "' | '" +
			  (exe ? exe : "kmirror-users") + "'";
	for (auto &a : args)
		cmd += " '" + a + "'";
	return run_command({ "sh", "-c", cmd }, 30000);
}

/* status --json: one integer of the first row of a table ("net" or
 * "connections") whose "backend"/"peer" field is set; -1 if none. */
inline int64_t status_figure(const Daemon &d, const char *table, const char *key,
		      std::string *backend = nullptr)
{
	ChildResult r;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return -1;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *row = json_array_get(json_object_get(root, table), 0);
	int64_t v = row ? json_integer_value(json_object_get(row, key)) : -1;
	if (backend != nullptr && row != nullptr)
		*backend = json_string_value(json_object_get(row, "backend"))
				   ?: "";
	json_decref(root);
	return v;
}

/* status_figure once it is at least `least`, polled with a deadline; the
 * last value read otherwise. The "net", "connections" and "listener"
 * figures are published on the worker's tick after the partition figures
 * a test waits on (and a tick whose publish meets the control thread
 * reading them skips it), so a read right after such a wait can be a
 * tick old. */
inline int64_t status_figure_at_least(const Daemon &d, const char *table, const char *key,
				      int64_t least, std::string *backend = nullptr,
				      int timeout_ms = 20000)
{
	int64_t v = -1;
	poll_until([&] { return (v = status_figure(d, table, key, backend)) >= least; },
		   timeout_ms);
	return v;
}

inline ProduceSpec idempotent(const std::string &topic, int32_t p, int64_t n,
		       uint64_t seed)
{
	ProduceSpec s;
	s.topic = topic;
	s.partition = p;
	s.count = n;
	s.mode = ProducerMode::kIdempotent;
	s.compression = "zstd";
	s.seed = seed;
	s.flush_every = 25;
	return s;
}

} // namespace kmtest

#endif
