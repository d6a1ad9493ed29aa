// Goal: kmirror-users writes the sasl.users.file kmirrord reads - salted
// credentials that check the password given on standard input and never
// hold it, mode 0600, replaced atomically, a file it cannot parse left as
// it was, and clear exit codes (0 done, 1 failed, 2 usage).
// Method: the built tool run as a shell runs it (the password piped in);
// the file read back with kafka/sasl_server.h's parser and checked with
// km_sasl_cred_check against the right and a wrong password.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kafka/sasl_server.h"
#include "tests/support/process.h"

using namespace kmtest;

namespace {

ChildResult users(const std::vector<std::string> &args, const std::string &input)
{
	const char *exe = getenv("KM_KMIRROR_USERS");
	std::string cmd = "printf '" + input + "' | '" +
			  (exe ? exe : "kmirror-users") + "'";
	for (auto &a : args)
		cmd += " '" + a + "'";
	return run_command({ "sh", "-c", cmd }, 30000);
}

struct Parsed {
	km_sasl_users u = {};
	~Parsed() { km_sasl_users_free(&u); }
};

std::string parse(const std::string &path, Parsed *p)
{
	std::string text = read_file(path), why(256, '\0');
	if (km_sasl_users_parse(text.data(), text.size(), &p->u, why.data(),
				why.size()) < 0)
		return why;
	return "";
}

int entries(const std::string &dir)
{
	int n = 0;
	DIR *d = opendir(dir.c_str());
	while (struct dirent *e = d ? readdir(d) : nullptr)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

} // namespace

TEST(KmirrorUsers, AddStoresSaltedCredentialsOnly)
{
	TempDir dir;
	std::string f = dir.file("users");
	ChildResult r = users({ "add", f, "alice" }, "s3cret-pw\\n");
	ASSERT_EQ(0, r.exit_code) << r.err;
	std::string text = read_file(f);
	EXPECT_EQ(std::string::npos, text.find("s3cret-pw"));
	struct stat st;
	ASSERT_EQ(0, stat(f.c_str(), &st));
	EXPECT_EQ(0600u, st.st_mode & 0777);
	EXPECT_EQ(1, entries(dir.path())) << "a temporary file left behind";
	Parsed p;
	ASSERT_EQ("", parse(f, &p));
	ASSERT_EQ(2u, p.u.n); /* both SCRAM mechanisms */
	for (uint32_t i = 0; i < p.u.n; i++) {
		EXPECT_TRUE(km_sasl_cred_check(&p.u.v[i], "s3cret-pw"));
		EXPECT_FALSE(km_sasl_cred_check(&p.u.v[i], "s3cret-pW"));
		EXPECT_EQ(4096, p.u.v[i].iterations);
	}

	// A new password replaces the old one; another user is added.
	ASSERT_EQ(0, users({ "add", f, "alice", "--mechanism", "SCRAM-SHA-512",
			     "--iterations", "5000" }, "new-pw\\n").exit_code);
	ASSERT_EQ(0, users({ "add", f, "bob" }, "bob-pw\\n").exit_code);
	Parsed q;
	ASSERT_EQ("", parse(f, &q));
	const km_scram_cred *c = km_sasl_users_find(&q.u, "alice", KM_SASL_SCRAM_SHA_512);
	ASSERT_NE(nullptr, c);
	EXPECT_TRUE(km_sasl_cred_check(c, "new-pw"));
	EXPECT_EQ(5000, c->iterations);
	c = km_sasl_users_find(&q.u, "alice", KM_SASL_SCRAM_SHA_256);
	ASSERT_NE(nullptr, c);
	EXPECT_TRUE(km_sasl_cred_check(c, "s3cret-pw")); /* the other kept */
	r = users({ "list", f }, "");
	EXPECT_EQ(0, r.exit_code);
	EXPECT_EQ(std::string::npos, r.out.find("salt")) << r.out;
	EXPECT_NE(std::string::npos, r.out.find("bob SCRAM-SHA-256 iterations=4096\n")) << r.out;
	r = users({ "remove", f, "alice" }, "");
	EXPECT_EQ(0, r.exit_code) << r.err;
	EXPECT_EQ(std::string::npos, users({ "list", f }, "").out.find("alice"));
}

TEST(KmirrorUsers, RefusalsLeaveTheFileAndSayWhy)
{
	TempDir dir;
	std::string f = dir.file("users");
	ASSERT_EQ(0, users({ "add", f, "alice" }, "pw\\n").exit_code);
	std::string before = read_file(f);

	ChildResult r = users({ "add", f, "bob" }, "");
	EXPECT_EQ(1, r.exit_code);
	EXPECT_NE(std::string::npos, r.err.find("no password")) << r.err;
	r = users({ "add", f, "bad name" }, "pw\\n");
	EXPECT_EQ(1, r.exit_code);
	EXPECT_NE(std::string::npos, r.err.find("space")) << r.err;
	r = users({ "remove", f, "carol" }, "");
	EXPECT_EQ(1, r.exit_code);
	EXPECT_NE(std::string::npos, r.err.find("no user carol")) << r.err;
	for (std::vector<std::string> a : { std::vector<std::string>{ "add", f, "x", "--iterations", "100" },
					    { "add", f, "x", "--mechanism", "PLAIN" },
					    { "frob", f, "x" }, { "list" } })
		EXPECT_EQ(2, users(a, "pw\\n").exit_code) << a[0];
	EXPECT_EQ(before, read_file(f));

	std::ofstream(f, std::ios::app) << "mallory SCRAM-SHA-256 salt=x\n";
	std::string broken = read_file(f);
	r = users({ "add", f, "bob" }, "pw\\n");
	EXPECT_EQ(1, r.exit_code);
	EXPECT_NE(std::string::npos, r.err.find("line 5:")) << r.err;
	EXPECT_EQ(broken, read_file(f));
	r = users({ "list", f }, "");
	EXPECT_EQ(1, r.exit_code);
	EXPECT_EQ(1, users({ "list", dir.file("missing") }, "").exit_code);
}
