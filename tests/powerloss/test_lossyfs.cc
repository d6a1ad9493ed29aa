/* Goal: lossyfs keeps exactly what was synced across a power cut, so the
 * power-loss suite can trust it: data written and not fsync'd/fdatasync'd
 * is gone (overwrites back to their synced bytes, the size back to the
 * synced size), synced data stays, a shared mmap write stays after msync;
 * direct I/O stays only with fdatasync or RWF_DSYNC; a create, rename or
 * unlink not followed by a fsync of its directory is undone, and one
 * followed by it stays (a new directory's name needs its parent's); a
 * clean unmount keeps everything.
 * Method: mount lossyfs over a temporary backing directory, do the
 * operations with plain syscalls on the mount, cut (SIGUSR1, lossyfs
 * restores and unmounts), then read the backing directory. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "tests/powerloss/lossyfs.h"
#include "tests/support/process.h"

using namespace kmtest;

namespace {

bool exists(const std::string &p)
{
	struct stat st;
	return stat(p.c_str(), &st) == 0;
}

/* Write content at offset off; sync: fdatasync after. */
void put(const std::string &p, const std::string &content, off_t off,
	 bool sync)
{
	int fd = open(p.c_str(), O_RDWR | O_CREAT, 0644);
	ASSERT_GE(fd, 0) << p << ": " << strerror(errno);
	ASSERT_EQ((ssize_t)content.size(),
		  pwrite(fd, content.data(), content.size(), off));
	if (sync) {
		ASSERT_EQ(0, fdatasync(fd));
	}
	close(fd);
}

void sync_path(const std::string &p)
{
	int fd = open(p.c_str(), O_RDONLY);
	ASSERT_GE(fd, 0) << p;
	ASSERT_EQ(0, fsync(fd)) << p;
	close(fd);
}

class Lossy : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (std::string why = lossyfs_unavailable(); !why.empty())
			GTEST_SKIP() << why;
		ASSERT_EQ("", fs_.mount());
	}
	std::string m(const std::string &n) { return fs_.path() + "/" + n; }
	std::string b(const std::string &n) { return back_.path() + "/" + n; }
	void cut()
	{
		std::string report;
		ASSERT_EQ("", fs_.cut(&report));
		EXPECT_NE(std::string::npos, report.find("0 restore errors"))
			<< report;
	}

	TempDir back_{ "km-lossy-back" }, mnt_{ "km-lossy-mnt" };
	LossyFs fs_{ back_.path(), mnt_.path() + "/m" };
};

TEST_F(Lossy, UnsyncedWritesAreGoneAndSyncedOnesStay)
{
	put(m("f"), "durable!", 0, true);
	sync_path(fs_.path());
	put(m("f"), "XY", 2, false);	     /* overwrite, not synced */
	put(m("f"), "tail", 8, false);	     /* extension, not synced */
	EXPECT_EQ("duXYble!tail", read_file(m("f")));
	cut();
	EXPECT_EQ("durable!", read_file(b("f")));
}

TEST_F(Lossy, FdatasyncKeepsTheWriteAndItsSize)
{
	put(m("f"), "one", 0, true);
	sync_path(fs_.path());
	put(m("f"), "two-and-more", 0, true);
	put(m("f"), "3", 0, false);
	cut();
	EXPECT_EQ("two-and-more", read_file(b("f")));
}

/* Direct I/O (O_DIRECT, no page cache) is durable only with a sync too:
 * fdatasync, or RWF_DSYNC on the write itself. */
TEST_F(Lossy, DirectWritesNeedASyncOrRwfDsync)
{
	const size_t kBlock = 4096;
	void *buf = nullptr;
	ASSERT_EQ(0, posix_memalign(&buf, kBlock, kBlock));
	for (const char *n : { "plain", "fdatasync", "dsync" }) {
		std::string name(n);
		memset(buf, name[0], kBlock);
		int fd = open(m(n).c_str(), O_RDWR | O_CREAT | O_DIRECT, 0644);
		ASSERT_GE(fd, 0) << n << ": " << strerror(errno);
		ASSERT_EQ(0, fsync(fd)); /* the empty file is durable */
		struct iovec iov = { buf, kBlock };
		int flags = name == "dsync" ? RWF_DSYNC : 0;
		ASSERT_EQ((ssize_t)kBlock, pwritev2(fd, &iov, 1, 0, flags)) << n;
		if (name == "fdatasync") {
			ASSERT_EQ(0, fdatasync(fd));
		}
		close(fd);
	}
	free(buf);
	sync_path(fs_.path());
	cut();
	EXPECT_EQ("", read_file(b("plain")));
	EXPECT_EQ(std::string(kBlock, 'f'), read_file(b("fdatasync")));
	EXPECT_EQ(std::string(kBlock, 'd'), read_file(b("dsync")));
}

TEST_F(Lossy, UnsyncedTruncateIsUndone)
{
	put(m("f"), std::string(100000, 'a') + "end", 0, true);
	sync_path(fs_.path());
	ASSERT_EQ(0, truncate(m("f").c_str(), 10));
	put(m("f"), "zz", 50, false);
	cut();
	EXPECT_EQ(std::string(100000, 'a') + "end", read_file(b("f")));
}

TEST_F(Lossy, MmapWriteStaysAfterMsyncAndIsGoneWithout)
{
	for (const char *n : { "synced", "unsynced" }) {
		int fd = open(m(n).c_str(), O_RDWR | O_CREAT, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(0, fallocate(fd, 0, 0, 8192));
		ASSERT_EQ(0, fsync(fd));
		char *p = (char *)mmap(nullptr, 8192, PROT_READ | PROT_WRITE,
				       MAP_SHARED, fd, 0);
		ASSERT_NE(MAP_FAILED, (void *)p);
		memcpy(p + 4096, "mapped", 6);
		if (std::string(n) == "synced") {
			ASSERT_EQ(0, msync(p, 8192, MS_SYNC));
		}
		munmap(p, 8192);
		close(fd);
	}
	sync_path(fs_.path());
	cut();
	EXPECT_EQ("mapped", read_file(b("synced")).substr(4096, 6));
	EXPECT_EQ(std::string(8192, '\0'), read_file(b("unsynced")));
}

TEST_F(Lossy, NamesNeedTheDirectoryFsync)
{
	put(m("old"), "old", 0, true);
	put(m("gone"), "gone", 0, true);
	put(m("kept"), "kept", 0, true);
	ASSERT_EQ(0, mkdir(m("d").c_str(), 0755));
	sync_path(fs_.path());
	/* Each file synced, none of these names. */
	put(m("new"), "new", 0, true);
	put(m("tmp"), "replacement", 0, true);
	ASSERT_EQ(0, rename(m("tmp").c_str(), m("old").c_str()));
	ASSERT_EQ(0, unlink(m("gone").c_str()));
	/* In d, synced with d: durable. */
	put(m("d/x"), "x", 0, true);
	ASSERT_EQ(0, rename(m("kept").c_str(), m("d/kept").c_str()));
	sync_path(m("d"));
	cut();
	EXPECT_FALSE(exists(b("new")));
	EXPECT_FALSE(exists(b("tmp")));
	EXPECT_EQ("old", read_file(b("old")));
	EXPECT_EQ("gone", read_file(b("gone")));
	EXPECT_EQ("x", read_file(b("d/x")));
	EXPECT_EQ("kept", read_file(b("d/kept")));
	EXPECT_FALSE(exists(b("kept")));
	EXPECT_FALSE(exists(b(".lossyfs-grave")));
}

TEST_F(Lossy, RenameOverSyncedWithTheDirectoryStays)
{
	put(m("state"), "v1", 0, true);
	sync_path(fs_.path());
	put(m("state.tmp"), "v2", 0, true);
	ASSERT_EQ(0, rename(m("state.tmp").c_str(), m("state").c_str()));
	sync_path(fs_.path());
	cut();
	EXPECT_EQ("v2", read_file(b("state")));
	EXPECT_FALSE(exists(b("state.tmp")));
}

/* A new directory's name needs its parent's fsync: its own fsync (or a
 * child's) is not enough, and without it the whole tree goes. */
TEST_F(Lossy, NewDirectoryNeedsItsParentsFsync)
{
	for (const char *d : { "kept", "lost" }) {
		ASSERT_EQ(0, mkdir(m(d).c_str(), 0755));
		ASSERT_EQ(0, mkdir(m(std::string(d) + "/q").c_str(), 0755));
		put(m(std::string(d) + "/q/f"), "f", 0, true);
		sync_path(m(std::string(d) + "/q"));
		sync_path(m(d));
	}
	sync_path(fs_.path());
	ASSERT_EQ(0, mkdir(m("later").c_str(), 0755));
	put(m("later/f"), "f", 0, true);
	sync_path(m("later"));
	ASSERT_EQ(0, rename(m("lost").c_str(), m("later/lost").c_str()));
	sync_path(m("later")); /* the rename's target, not its source */
	cut();
	EXPECT_EQ("f", read_file(b("kept/q/f")));
	EXPECT_FALSE(exists(b("later")));
	/* The rename was made durable with later/ and later/ is gone, so the
	 * tree it moved is gone with it: a disk would say the same. */
	EXPECT_FALSE(exists(b("lost")));
}

TEST_F(Lossy, CleanUnmountKeepsEverything)
{
	put(m("f"), "unsynced", 0, false);
	ASSERT_EQ(0, mkdir(m("d").c_str(), 0755));
	ASSERT_EQ("", fs_.unmount());
	EXPECT_EQ("unsynced", read_file(b("f")));
	EXPECT_TRUE(exists(b("d")));
	EXPECT_FALSE(exists(b(".lossyfs-grave")));
}

} // namespace
