// Goal: the cluster id is Kafka's format (22-char URL-safe base64 of a
// version-4 UUID), is generated once and kept in data.dir/meta.properties
// (Kafka's v1 fields, written atomically), reads back the same on every
// later start, and a configuration that disagrees with it is refused with a
// message naming both values.
// Method: known encodings from Kafka's Uuid, then resolve against fresh and
// prepared data dirs in a temp dir and read the files back.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "config_util.h"
#include "control/cluster_id.h"
#include "control/config.h"

namespace {

using cfgtest::load;
using cfgtest::Loaded;
using cfgtest::slurp;
using cfgtest::TempDir;

struct Resolved {
	int rc;
	std::string err;
	std::string id;
};

Resolved resolve(const std::string &dir, std::vector<std::string> sets = {})
{
	sets.insert(sets.begin(), "data.dir=" + dir);
	Loaded l = load(nullptr, sets);
	EXPECT_EQ(0, l.rc) << l.err;
	char err[KM_CONFIG_ERR_BYTES_MAX] = "";
	Resolved r;
	r.rc = km_cluster_id_resolve(l.cfg.get(), err, sizeof(err));
	r.err = err;
	r.id = l->cluster_id;
	return r;
}

// Decode 22 base64url characters (test-side, independent of the encoder).
std::vector<uint8_t> decode(const std::string &s)
{
	static const std::string alphabet =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	std::vector<uint8_t> out;
	uint32_t acc = 0;
	int bits = 0;
	for (char c : s) {
		size_t v = alphabet.find(c);
		EXPECT_NE(std::string::npos, v) << s;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out.push_back((uint8_t)(acc >> bits));
		}
	}
	return out;
}

TEST(ClusterId, EncodesLikeKafkasUuid)
{
	uint8_t u[16] = {};
	char out[KM_CLUSTER_ID_UUID_CHARS + 1];
	km_cluster_id_encode(u, out);
	EXPECT_STREQ("AAAAAAAAAAAAAAAAAAAAAA", out); // Uuid.ZERO_UUID
	u[15] = 1;
	km_cluster_id_encode(u, out);
	EXPECT_STREQ("AAAAAAAAAAAAAAAAAAAAAQ", out); // Uuid.METADATA_TOPIC_ID
	memset(u, 0xff, sizeof(u));
	km_cluster_id_encode(u, out);
	EXPECT_STREQ("_____________________w", out);
	for (int i = 0; i < 16; i++)
		u[i] = (uint8_t)(i * 17);
	km_cluster_id_encode(u, out);
	std::vector<uint8_t> back = decode(out);
	ASSERT_EQ(16u, back.size());
	EXPECT_EQ(0, memcmp(u, back.data(), 16));
}

TEST(ClusterId, GeneratedIdsAreVersion4AndNeverStartWithDash)
{
	std::set<std::string> seen;
	for (int i = 0; i < 2000; i++) {
		char id[KM_CLUSTER_ID_UUID_CHARS + 1];
		ASSERT_EQ(0, km_cluster_id_generate(id));
		ASSERT_EQ(22u, strlen(id));
		EXPECT_NE('-', id[0]);
		EXPECT_TRUE(km_cluster_id_is_valid(id));
		std::vector<uint8_t> u = decode(id);
		EXPECT_EQ(0x40, u[6] & 0xf0) << id;
		EXPECT_EQ(0x80, u[8] & 0xc0) << id;
		EXPECT_TRUE(seen.insert(id).second) << "repeated " << id;
	}
}

TEST(ClusterId, Validity)
{
	EXPECT_TRUE(km_cluster_id_is_valid("q1Sh-9_ISia_zwGINzRvyQ"));
	EXPECT_TRUE(km_cluster_id_is_valid("a"));
	EXPECT_TRUE(km_cluster_id_is_valid(std::string(64, 'x').c_str()));
	EXPECT_FALSE(km_cluster_id_is_valid(std::string(65, 'x').c_str()));
	EXPECT_FALSE(km_cluster_id_is_valid(""));
	EXPECT_FALSE(km_cluster_id_is_valid("a b"));
	EXPECT_FALSE(km_cluster_id_is_valid("a/b"));
	EXPECT_FALSE(km_cluster_id_is_valid("a=b"));
}

TEST(ClusterId, GeneratedOnceAndStableAcrossLoads)
{
	TempDir d;
	std::string dir = d.path + "/nested/data"; // created, parents too
	Resolved first = resolve(dir);
	ASSERT_EQ(0, first.rc) << first.err;
	EXPECT_EQ(22u, first.id.size());
	EXPECT_TRUE(km_cluster_id_is_valid(first.id.c_str()));
	Resolved second = resolve(dir);
	ASSERT_EQ(0, second.rc) << second.err;
	EXPECT_EQ(first.id, second.id);
	EXPECT_FALSE(std::filesystem::exists(dir + "/meta.properties.tmp"));
	Resolved other = resolve(d.path + "/other");
	ASSERT_EQ(0, other.rc);
	EXPECT_NE(first.id, other.id) << "each data.dir gets its own id";
}

TEST(ClusterId, MetaPropertiesFormat)
{
	TempDir d;
	Resolved r = resolve(d.path, { "node.id=5" });
	ASSERT_EQ(0, r.rc) << r.err;
	std::string text = slurp(d.path + "/meta.properties");
	// As Kafka's PropertiesUtils.writePropertiesFile(): an empty comment,
	// the date comment of java.util.Properties.store(), then the fields.
	std::regex want("#\n#(Mon|Tue|Wed|Thu|Fri|Sat|Sun) "
			"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
			"[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC [0-9]{4}\n"
			"cluster.id=" + r.id + "\n"
			"node.id=5\n"
			"version=1\n");
	EXPECT_TRUE(std::regex_match(text, want)) << text;
	struct stat st;
	ASSERT_EQ(0, stat((d.path + "/meta.properties").c_str(), &st));
	EXPECT_EQ(0644u, st.st_mode & 0777);
}

TEST(ClusterId, ConfiguredIdIsPersistedAndChecked)
{
	TempDir d;
	Resolved r = resolve(d.path, { "cluster.id=q1Sh-9_ISia_zwGINzRvyQ" });
	ASSERT_EQ(0, r.rc) << r.err;
	EXPECT_EQ("q1Sh-9_ISia_zwGINzRvyQ", r.id);
	EXPECT_NE(std::string::npos, slurp(d.path + "/meta.properties")
					     .find("\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\n"));
	// Same id again: fine. No id: the persisted one.
	EXPECT_EQ(0, resolve(d.path, { "cluster.id=q1Sh-9_ISia_zwGINzRvyQ" }).rc);
	r = resolve(d.path);
	ASSERT_EQ(0, r.rc);
	EXPECT_EQ("q1Sh-9_ISia_zwGINzRvyQ", r.id);
}

TEST(ClusterId, MismatchNamesBoth)
{
	TempDir d;
	Resolved first = resolve(d.path);
	ASSERT_EQ(0, first.rc);
	Resolved r = resolve(d.path, { "cluster.id=AAAAAAAAAAAAAAAAAAAAAQ" });
	EXPECT_EQ(KM_EMETAMISMATCH, r.rc);
	EXPECT_EQ("cluster.id \"AAAAAAAAAAAAAAAAAAAAAQ\" in the configuration does not match cluster.id \"" +
			  first.id + "\" in " + d.path + "/meta.properties",
		  r.err);
	r = resolve(d.path, { "node.id=2" });
	EXPECT_EQ(KM_EMETAMISMATCH, r.rc);
	EXPECT_EQ("node.id 2 in the configuration does not match node.id 1 in " +
			  d.path + "/meta.properties",
		  r.err);
	EXPECT_EQ(first.id, resolve(d.path).id) << "the file is left alone";
}

TEST(ClusterId, ReadsAMetaPropertiesWrittenByKafka)
{
	TempDir d;
	d.file("meta.properties",
	       "#\n#Thu Jan 25 09:59:42 UTC 2024\n"
	       "node.id=1\ndirectory.id=Gq2d_AgxRoSvm8hQ6yG7cw\n"
	       "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n");
	Resolved r = resolve(d.path);
	ASSERT_EQ(0, r.rc) << r.err;
	EXPECT_EQ("MkU3OEVBNTcwNTJENDM2Qg", r.id);
}

TEST(ClusterId, MalformedMetaProperties)
{
	struct {
		const char *text;
		std::string msg; // after "<dir>/meta.properties"
	} cases[] = {
		{ "cluster.id=abc\nnode.id=1\n", ": no version line" },
		{ "version=0\nbroker.id=1\ncluster.id=abc\n",
		  ": version 0 is not supported (kmirrord reads and writes version=1)" },
		{ "version=1\nnode.id=1\n",
		  ": cluster.id is missing or not a valid cluster id" },
		{ "version=1\nnode.id=1\ncluster.id=a b\n",
		  ": cluster.id is missing or not a valid cluster id" },
		{ "version=1\ncluster.id=abc\n",
		  ": node.id is missing or not a number from 0 to 2147483647" },
		{ "version=1\ncluster.id=abc\nnode.id=-3\n",
		  ": node.id is missing or not a number from 0 to 2147483647" },
		{ "version=1\ncluster.id=\\u12\n",
		  ":2: malformed \\uxxxx escape (needs 4 hex digits, a whole surrogate pair, not \\u0000)" },
	};
	for (auto &c : cases) {
		TempDir d;
		d.file("meta.properties", c.text);
		Resolved r = resolve(d.path);
		EXPECT_EQ(KM_EMETAPROPS, r.rc) << c.text;
		EXPECT_EQ(d.path + "/meta.properties" + c.msg, r.err);
		EXPECT_EQ(c.text, slurp(d.path + "/meta.properties"))
			<< "never overwritten";
	}
}

TEST(ClusterId, DataDirThatIsAFile)
{
	TempDir d;
	std::string file = d.file("plain", "x");
	Resolved r = resolve(file);
	EXPECT_EQ(-ENOTDIR, r.rc);
	EXPECT_EQ("cannot read " + file + "/meta.properties: Not a directory", r.err);
}

TEST(ClusterId, DataDirWithLogsButNoMetaStillGetsAnId)
{
	TempDir d;
	std::filesystem::create_directory(d.path + "/orders-0");
	Resolved r = resolve(d.path); // logged at WARN
	ASSERT_EQ(0, r.rc) << r.err;
	EXPECT_TRUE(std::filesystem::exists(d.path + "/meta.properties"));
}

TEST(ClusterId, StaleTmpFileIsReplaced)
{
	TempDir d;
	d.file("meta.properties.tmp", "garbage from a crash\n");
	Resolved r = resolve(d.path);
	ASSERT_EQ(0, r.rc) << r.err;
	EXPECT_FALSE(std::filesystem::exists(d.path + "/meta.properties.tmp"));
	EXPECT_EQ(r.id, resolve(d.path).id);
}

} // namespace
