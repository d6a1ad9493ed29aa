/* lossyfs (lossyfs.c) as a child process for tests: mount it over a
 * backing directory, cut the power (SIGUSR1: only what was synced stays in
 * the backing directory, then it unmounts), or unmount it keeping all. */
#ifndef KM_TESTS_POWERLOSS_LOSSYFS_H
#define KM_TESTS_POWERLOSS_LOSSYFS_H

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/support/process.h"

namespace kmtest {

/* Why lossyfs cannot run here ("" if it can): mounting needs root and
 * /dev/fuse. */
inline std::string lossyfs_unavailable()
{
	if (geteuid() != 0)
		return "not root: mounting lossyfs (FUSE) needs root";
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return "/dev/fuse cannot be opened: FUSE is not available";
	close(fd);
	return "";
}

class LossyFs {
public:
	LossyFs(std::string backing, std::string mnt)
		: backing_(std::move(backing)), mnt_(std::move(mnt))
	{
		mkdir(mnt_.c_str(), 0700);
	}
	~LossyFs()
	{
		if (child_.running()) {
			ChildResult r;
			child_.kill(SIGTERM);
			child_.wait(10000, &r);
		}
		/* A lossyfs that died (crashed, killed) leaves its mount
		 * behind, answering ENOTCONN: detach it (EINVAL if none). */
		umount2(mnt_.c_str(), MNT_DETACH);
	}

	/* Mount and wait until it serves. */
	std::string mount()
	{
		const char *exe = getenv("KM_LOSSYFS");
		std::string line;

		if (std::string e = child_.spawn({ exe ? exe : "lossyfs",
						   backing_, mnt_ });
		    !e.empty())
			return e;
		if (std::string e = child_.read_line(10000, &line); !e.empty())
			return "lossyfs did not mount: " + e + " " +
			       child_.stderr_so_far();
		return line == "mounted" ? "" : "lossyfs said: " + line;
	}
	/* The power cut: "" once the backing directory holds only what was
	 * synced and the mount is gone; *report: its stderr line. */
	std::string cut(std::string *report = nullptr)
	{
		return end(SIGUSR1, report);
	}
	/* A clean unmount: everything kept. */
	std::string unmount() { return end(SIGTERM, nullptr); }

	const std::string &path() const { return mnt_; }
	const std::string &backing() const { return backing_; }

private:
	std::string end(int sig, std::string *report)
	{
		ChildResult r;

		if (std::string e = child_.kill(sig); !e.empty())
			return e;
		if (std::string e = child_.wait(30000, &r); !e.empty())
			return e;
		if (report != nullptr)
			*report = r.err;
		return r.exit_code == 0 ? "" : "lossyfs: " + r.describe();
	}

	std::string backing_, mnt_;
	Child child_;
};

} // namespace kmtest

#endif
