/* Child processes and temporary directories for tests; see process.h.
 * Goal: run tools and peers from a test with every wait bounded.
 * Method: posix_spawnp (safe in a process with librdkafka's threads), a pipe
 * for stdout and an unlinked file for stderr (read at each wait), a pidfd to
 * poll for the exit alongside them. */
#include "process.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "blocking_io.h"

extern char **environ;

namespace kmtest {

namespace {

/* How long to wait for a SIGKILLed child to go: it cannot refuse, so this
 * only guards against a process stuck in the kernel. */
const int kKillGraceMs = 10000;

std::string errno_text(const char *what, int err)
{
	return std::string(what) + ": " + strerror(err);
}

/* The environment with `extra` added, an entry of `extra` replacing one of
 * the same name. The strings live in *store. */
std::vector<char *> make_env(const std::vector<std::string> &extra,
			     std::vector<std::string> *store)
{
	std::vector<char *> env;

	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t n = eq ? (size_t)(eq - *e) + 1 : strlen(*e);
		bool replaced = false;

		for (const std::string &x : extra)
			replaced |= x.compare(0, n, *e, n) == 0;
		if (!replaced)
			store->push_back(*e);
	}
	store->insert(store->end(), extra.begin(), extra.end());
	for (std::string &s : *store)
		env.push_back(&s[0]);
	env.push_back(nullptr);
	return env;
}

/* Read what is there without blocking; *eof once the writers are gone. */
void read_available(int fd, std::string *into, bool *eof)
{
	char buf[4096];

	for (;;) { /* bounded: ends at EAGAIN or EOF */
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0) {
			into->append(buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			*eof = true;
		return;
	}
}

/* The child's stderr goes to an unlinked file, not a pipe: a daemon that
 * logs more than a pipe holds (64 KiB; a line per partition at start is
 * 300 KB for 2,000 partitions) between two of our reads would block in
 * write(2), and with it the thread that logs. fds[0] reads it from the
 * start, fds[1] is the child's. @return 0 or an errno. */
int stderr_file(int fds[2])
{
	const char *tmp = getenv("TMPDIR");
	std::string path = std::string(tmp && *tmp ? tmp : "/tmp") +
			   "/km-child-stderr-XXXXXX";
	int err;

	fds[1] = mkostemp(&path[0], O_CLOEXEC | O_APPEND);
	if (fds[1] < 0)
		return errno;
	fds[0] = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	err = fds[0] < 0 ? errno : 0;
	unlink(path.c_str());
	if (err != 0)
		close(fds[1]);
	return err;
}

int unlink_one(const char *path, const struct stat *, int, struct FTW *)
{
	return remove(path);
}

} // namespace

std::string ChildResult::describe() const
{
	std::string s = signal ? "killed by signal " + std::to_string(signal)
			       : "exit " + std::to_string(exit_code);

	if (timed_out)
		s += " (timed out)";
	if (!err.empty())
		s += ", stderr: " + err;
	return s;
}

Child::~Child()
{
	if (pid_ > 0) {
		::kill(pid_, SIGKILL);
		waitpid(pid_, nullptr, 0);
	}
	close_fds();
}

void Child::close_fds()
{
	for (int *fd : {&pidfd_, &out_, &err_})
		if (*fd >= 0) {
			close(*fd);
			*fd = -1;
		}
}

std::string Child::spawn(const std::vector<std::string> &argv,
			 const std::vector<std::string> &env)
{
	int out[2], err[2] = { -1, -1 }, rc;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	std::vector<std::string> env_store;
	std::vector<char *> envp = make_env(env, &env_store), args;

	if (pid_ > 0 || argv.empty())
		return pid_ > 0 ? "already running" : "no argv";
	for (const std::string &a : argv)
		args.push_back(const_cast<char *>(a.c_str()));
	args.push_back(nullptr);
	if (pipe2(out, O_CLOEXEC) != 0)
		return errno_text("pipe2", errno);
	if ((rc = stderr_file(err)) != 0) {
		close(out[0]);
		close(out[1]);
		return errno_text("stderr file", rc);
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	/* A clean signal state: nothing blocked, the usual dispositions. */
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigemptyset(&dfl);
	for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGHUP})
		sigaddset(&dfl, s);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr,
				 POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawnp(&pid_, args[0], &fa, &attr, args.data(),
			  envp.data());
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	close(err[1]);
	out_ = out[0];
	err_ = err[0];
	if (rc != 0) {
		pid_ = -1;
		close_fds();
		return errno_text(("spawn " + argv[0]).c_str(), rc);
	}
	fcntl(out_, F_SETFL, O_NONBLOCK);
	pidfd_ = (int)syscall(SYS_pidfd_open, pid_, 0);
	return pidfd_ < 0 ? errno_text("pidfd_open", errno) : "";
}

void Child::drain(bool *out_eof, bool *err_eof)
{
	if (out_ >= 0 && !*out_eof)
		read_available(out_, &out_buf_, out_eof);
	/* A file: at its end a read returns 0 at once, and it may grow. */
	if (err_ >= 0)
		read_available(err_, &err_buf_, err_eof);
}

std::string Child::read_line(int timeout_ms, std::string *line)
{
	Clock::time_point deadline = deadline_in(timeout_ms);
	bool out_eof = false, err_eof = false;

	if (pid_ <= 0)
		return "not running";
	for (;;) { /* bounded by the deadline */
		size_t nl = out_buf_.find('\n');
		struct pollfd p[3] = { { out_, POLLIN, 0 },
				       { err_eof ? -1 : err_, POLLIN, 0 },
				       { pidfd_, POLLIN, 0 } };

		if (nl != std::string::npos) {
			*line = out_buf_.substr(0, nl);
			out_buf_.erase(0, nl + 1);
			return "";
		}
		if (out_eof)
			return "stdout closed before a whole line; stderr: " +
			       err_buf_;
		if (ms_left(deadline) == 0)
			return "no line on stdout within " +
			       std::to_string(timeout_ms) + " ms; stderr: " +
			       err_buf_;
		if (poll(p, 3, ms_left(deadline)) < 0 && errno != EINTR)
			return errno_text("poll", errno);
		/* After an exit this drain sees all it wrote. */
		drain(&out_eof, &err_eof);
		if (p[2].revents && out_buf_.find('\n') == std::string::npos)
			return "exited before a line on stdout; stderr: " +
			       err_buf_;
	}
}

std::string Child::kill(int sig)
{
	if (pid_ <= 0)
		return "not running";
	return ::kill(pid_, sig) == 0 ? "" : errno_text("kill", errno);
}

std::string Child::reap(ChildResult *res)
{
	int status = 0;
	bool out_eof = false, err_eof = false;

	drain(&out_eof, &err_eof);
	if (waitpid(pid_, &status, 0) != pid_)
		return errno_text("waitpid", errno);
	pid_ = -1;
	close_fds();
	res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	res->out = std::move(out_buf_);
	res->err = std::move(err_buf_);
	out_buf_.clear();
	err_buf_.clear();
	return "";
}

bool Child::exited() const
{
	struct pollfd gone = { pidfd_, POLLIN, 0 };

	return pid_ > 0 && pidfd_ >= 0 && poll(&gone, 1, 0) == 1;
}

std::string Child::wait(int timeout_ms, ChildResult *res)
{
	Clock::time_point deadline = deadline_in(timeout_ms);
	bool out_eof = false, err_eof = false;

	if (pid_ <= 0)
		return "not running";
	*res = ChildResult();
	for (;;) { /* bounded by the deadline */
		struct pollfd p[3] = { { out_eof ? -1 : out_, POLLIN, 0 },
				       { err_eof ? -1 : err_, POLLIN, 0 },
				       { pidfd_, POLLIN, 0 } };
		int left = ms_left(deadline);

		if (left == 0)
			break;
		if (poll(p, 3, left) < 0 && errno != EINTR)
			return errno_text("poll", errno);
		drain(&out_eof, &err_eof);
		if (p[2].revents)
			return reap(res);
	}
	res->timed_out = true;
	::kill(pid_, SIGKILL);
	struct pollfd gone = { pidfd_, POLLIN, 0 };
	if (poll(&gone, 1, kKillGraceMs) != 1)
		return "child " + std::to_string(pid_) + " survives SIGKILL";
	std::string err = reap(res);
	res->timed_out = true;
	return err;
}

ChildResult run_command(const std::vector<std::string> &argv, int timeout_ms,
			const std::vector<std::string> &env)
{
	Child c;
	ChildResult res;
	std::string err = c.spawn(argv, env);

	if (err.empty())
		err = c.wait(timeout_ms, &res);
	if (!err.empty())
		res.err = "(" + err + ") " + res.err;
	return res;
}

TempDir::TempDir(const std::string &prefix)
{
	const char *tmp = getenv("TMPDIR");
	std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" +
			   prefix + "-XXXXXX";

	if (mkdtemp(&tmpl[0]) == nullptr)
		error_ = errno_text(("mkdtemp " + tmpl).c_str(), errno);
	else
		path_ = tmpl;
}

TempDir::~TempDir()
{
	if (!path_.empty())
		nftw(path_.c_str(), unlink_one, 16, FTW_DEPTH | FTW_PHYS);
}

std::string TempDir::file(const std::string &name) const
{
	return path_ + "/" + name;
}

std::string wait_for_file(const std::string &path, int timeout_ms)
{
	Clock::time_point deadline = deadline_in(timeout_ms);
	size_t slash = path.rfind('/');
	std::string dir = slash == std::string::npos ? "."
			  : slash == 0		     ? "/"
						     : path.substr(0, slash);
	int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	std::string err;

	if (fd < 0)
		return errno_text("inotify_init1", errno);
	/* Watch first, then look: a file made in between is not missed. */
	if (inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0)
		err = errno_text(("inotify_add_watch " + dir).c_str(), errno);
	while (err.empty() && access(path.c_str(), F_OK) != 0) {
		struct pollfd p = { fd, POLLIN, 0 };
		char buf[4096];

		if (ms_left(deadline) == 0)
			err = path + " did not appear within " +
			      std::to_string(timeout_ms) + " ms";
		else if (poll(&p, 1, ms_left(deadline)) > 0)
			while (read(fd, buf, sizeof(buf)) > 0)
				;
	}
	close(fd);
	return err;
}

std::string read_file(const std::string &path, std::string *err)
{
	std::ifstream in(path, std::ios::binary);
	std::stringstream ss;

	if (!in) {
		if (err)
			*err = "cannot open " + path;
		return "";
	}
	ss << in.rdbuf();
	return ss.str();
}

} // namespace kmtest
