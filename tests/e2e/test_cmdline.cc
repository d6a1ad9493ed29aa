/* Goal: the built kmirrord refuses a bad command line or configuration
 * with one message an operator can act on, on stderr, and exit status 2:
 * the usage follows a command-line error (once), a configuration error
 * stands alone, and "kmirrord: " is never doubled.
 * Method: run the binary (KM_KMIRRORD, set by meson) as a child with each
 * bad start and compare its whole stderr and its exit status; the usage
 * expected is what `kmirrord --help` prints. None of these starts reaches
 * the daemon, so no source and no port are needed. */
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/process.h"

using namespace kmtest;

namespace {

ChildResult kmirrord(std::vector<std::string> args)
{
	const char *exe = getenv("KM_KMIRRORD");

	args.insert(args.begin(), exe ? exe : "kmirrord");
	return run_command(args, 30000);
}

std::string usage()
{
	ChildResult r = kmirrord({ "--help" });

	EXPECT_EQ(0, r.exit_code) << r.describe();
	EXPECT_EQ(0u, r.out.rfind("usage: kmirrord --config FILE [--set key=value]...\n", 0))
		<< r.out;
	return r.out;
}

TEST(Cmdline, NoArgumentsSaysAConfigurationIsNeeded)
{
	std::string use = usage();
	ChildResult r = kmirrord({});

	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: no configuration: pass --config FILE (or --set key=value settings); data.dir is required\n" +
			  use,
		  r.err);
	EXPECT_EQ("", r.out);
}

TEST(Cmdline, UnknownFlagIsNamedAndTheUsageShownOnce)
{
	std::string use = usage();
	ChildResult r = kmirrord({ "--bogus" });

	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: --bogus is not an option\n" + use, r.err);
	EXPECT_EQ("", r.out);

	r = kmirrord({ "--config" });
	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: --config needs a value\n" + use, r.err);

	r = kmirrord({ "data.dir=/tmp/km" });
	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: data.dir=/tmp/km is not an option (a setting is --set data.dir=/tmp/km)\n" +
			  use,
		  r.err);
}

TEST(Cmdline, ConfigWithoutDataDirNamesTheFile)
{
	TempDir d("km-cmdline");
	ASSERT_EQ("", d.error());
	std::string path = d.file("k.properties");
	FILE *f = fopen(path.c_str(), "w");
	ASSERT_NE(nullptr, f);
	fputs("# no data.dir\nlog.level=info\n", f);
	fclose(f);

	ChildResult r = kmirrord({ "--config", path });
	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: " + path + ": data.dir is required\n", r.err);
	EXPECT_EQ("", r.out);
}

TEST(Cmdline, ErrorsWithoutAFileAreNotPrefixedTwice)
{
	ChildResult r = kmirrord({ "--set", "log.level=debug" });
	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: data.dir is required\n", r.err);

	r = kmirrord({ "--set", "data.dir=/tmp/km", "--set", "topics=a" });
	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: topics is set but source.bootstrap.servers is not (a mirroring host needs both; a host that only serves local partitions sets neither)\n",
		  r.err);
}

} // namespace
