// Goal: control/props.c reads properties text the way java.util.Properties
// .load() does (separators, comments, continuations, escapes, line ends),
// with the documented differences (trailing blanks trimmed, NUL and broken
// \u escapes refused), and km_props_escape() output reads back unchanged.
// Method: parse hand-written texts and compare the (key, value, line) list.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.h"
#include "control/props.h"

namespace {

using Pair = std::tuple<std::string, std::string, uint32_t>;

struct Parsed {
	int rc = 0;
	std::vector<Pair> pairs;
	uint32_t err_line = 0;
	std::string err_what;
};

int collect(void *arg, const char *key, const char *value, uint32_t line)
{
	static_cast<std::vector<Pair> *>(arg)->emplace_back(key, value, line);
	return 0;
}

Parsed parse(const std::string &text)
{
	Parsed p;
	const char *what = nullptr;
	p.rc = km_props_parse(text.data(), text.size(), collect, &p.pairs,
			      &p.err_line, &what);
	if (what != nullptr)
		p.err_what = what;
	return p;
}

TEST(Props, SeparatorsAndBlanks)
{
	Parsed p = parse("a=1\nb : 2\nc 3\n  d\t=\tfour  \ne=\nf\ng:=x\nh = = y\n");
	ASSERT_EQ(0, p.rc);
	std::vector<Pair> want = {
		{ "a", "1", 1 }, { "b", "2", 2 }, { "c", "3", 3 },
		{ "d", "four", 4 }, { "e", "", 5 }, { "f", "", 6 },
		{ "g", "=x", 7 }, { "h", "= y", 8 },
	};
	EXPECT_EQ(want, p.pairs);
}

TEST(Props, CommentsAndBlankLines)
{
	Parsed p = parse("# one\n! two\n   # indented\n\n\t\nk=v # not a comment\n"
			 "# comment ending in a backslash \\\nnext=1\n");
	ASSERT_EQ(0, p.rc);
	std::vector<Pair> want = { { "k", "v # not a comment", 6 },
				   { "next", "1", 8 } };
	EXPECT_EQ(want, p.pairs);
}

TEST(Props, LineEndings)
{
	Parsed p = parse("a=1\r\nb=2\rc=3\nd=4");
	ASSERT_EQ(0, p.rc);
	std::vector<Pair> want = { { "a", "1", 1 }, { "b", "2", 2 },
				   { "c", "3", 3 }, { "d", "4", 4 } };
	EXPECT_EQ(want, p.pairs);
}

TEST(Props, Continuations)
{
	// Leading blanks of the next line are dropped; blank lines right
	// after a continuation are skipped, as Java's LineReader does.
	Parsed p = parse("topics=a,\\\n    b,\\\r\n\tc\nnext=1\n"
			 "skip=x\\\n\n   \n  y\nlast=z\\");
	ASSERT_EQ(0, p.rc);
	std::vector<Pair> want = { { "topics", "a,b,c", 1 },
				   { "next", "1", 4 },
				   { "skip", "xy", 5 },
				   { "last", "z", 9 } };
	EXPECT_EQ(want, p.pairs);
}

TEST(Props, EvenBackslashesDoNotContinue)
{
	Parsed p = parse("a=x\\\\\nb=y\\\\\\\n  z\nc=\\\n\\\\\\\nw\n");
	ASSERT_EQ(0, p.rc);
	// "\\\\" is one literal backslash; three make one plus a continuation;
	// on a continued line the count starts again.
	std::vector<Pair> want = { { "a", "x\\", 1 },
				   { "b", "y\\z", 2 },
				   { "c", "\\w", 4 } };
	EXPECT_EQ(want, p.pairs);
}

TEST(Props, Escapes)
{
	Parsed p = parse("k=\\t\\n\\r\\f|\\\\|\\=\\:\\#\\!|\\q\n"
			 "a\\=b\\ c\\:d=v\n"
			 "u=\\u00e9\\u20AC\\uD83D\\uDE00\n"
			 "sp=\\ lead and trail\\ \n"
			 "keep=x\\ \\ \n");
	ASSERT_EQ(0, p.rc);
	ASSERT_EQ(5u, p.pairs.size());
	EXPECT_EQ(Pair("k", "\t\n\r\f|\\|=:#!|q", 1), p.pairs[0]);
	EXPECT_EQ(Pair("a=b c:d", "v", 2), p.pairs[1]);
	EXPECT_EQ(Pair("u", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 3), p.pairs[2]);
	EXPECT_EQ(Pair("sp", " lead and trail ", 4), p.pairs[3]);
	EXPECT_EQ(Pair("keep", "x  ", 5), p.pairs[4]);
}

TEST(Props, Utf8PassesThrough)
{
	Parsed p = parse("k=caf\xc3\xa9\n");
	ASSERT_EQ(0, p.rc);
	EXPECT_EQ(Pair("k", "caf\xc3\xa9", 1), p.pairs[0]);
}

TEST(Props, DuplicatesAllReportedInOrder)
{
	Parsed p = parse("k=1\nk=2\n");
	ASSERT_EQ(0, p.rc);
	std::vector<Pair> want = { { "k", "1", 1 }, { "k", "2", 2 } };
	EXPECT_EQ(want, p.pairs);
}

TEST(Props, MalformedEscapes)
{
	const char *bad[] = {
		"a=1\nk=\\u12\n",	  // short
		"a=1\nk=\\u12zz\n",	  // not hex
		"a=1\nk=\\u0000\n",	  // NUL
		"a=1\nk=\\uDE00\n",	  // lone low surrogate
		"a=1\nk=\\uD83Dx\n",	  // high surrogate alone
		"a=1\nk=\\uD83D\\u0041\n", // high + non-low
	};
	for (const char *text : bad) {
		Parsed p = parse(text);
		EXPECT_EQ(KM_ECFGSYNTAX, p.rc) << text;
		EXPECT_EQ(2u, p.err_line) << text;
		EXPECT_NE(std::string::npos, p.err_what.find("\\uxxxx")) << text;
	}
}

TEST(Props, NulByteRefused)
{
	std::string text("a=1\nb=2\nc=x\0y\n", 14);
	Parsed p = parse(text);
	EXPECT_EQ(KM_ECFGSYNTAX, p.rc);
	EXPECT_EQ(3u, p.err_line);
	EXPECT_EQ("NUL byte in the text", p.err_what);
	EXPECT_TRUE(p.pairs.empty()) << "checked before any pair is reported";
}

int stop_at_b(void *arg, const char *key, const char *, uint32_t)
{
	++*static_cast<int *>(arg);
	return std::string(key) == "b" ? -EBADMSG : 0;
}

TEST(Props, CallbackStopsTheParse)
{
	int calls = 0;
	std::string text = "a=1\nb=2\nc=3\n";
	EXPECT_EQ(-EBADMSG, km_props_parse(text.data(), text.size(), stop_at_b,
					   &calls, nullptr, nullptr));
	EXPECT_EQ(2, calls);
}

TEST(Props, EmptyText)
{
	Parsed p = parse("");
	EXPECT_EQ(0, p.rc);
	EXPECT_TRUE(p.pairs.empty());
}

std::string escape(const std::string &s, int is_key)
{
	size_t n = km_props_escape(nullptr, 0, s.c_str(), is_key);
	std::string out(n + 1, '\0');
	EXPECT_EQ(n, km_props_escape(&out[0], out.size(), s.c_str(), is_key));
	out.resize(n);
	return out;
}

TEST(Props, EscapeReadsBack)
{
	const std::string samples[] = {
		"plain", "", " lead", "trail  ", "a=b:c d", "#hash", "!bang",
		"back\\slash", "tab\tnl\ncr\rff\f", std::string("\x01\x7f", 2),
		"caf\xc3\xa9", "\\", "  ", "=", "x\\",
	};
	for (const std::string &k : samples) {
		for (const std::string &v : samples) {
			if (k.empty())
				continue; // an empty key reads back, but as ""
			std::string text = escape(k, 1) + "=" + escape(v, 0) + "\n";
			Parsed p = parse(text);
			ASSERT_EQ(0, p.rc) << text;
			ASSERT_EQ(1u, p.pairs.size()) << text;
			EXPECT_EQ(k, std::get<0>(p.pairs[0])) << text;
			EXPECT_EQ(v, std::get<1>(p.pairs[0])) << text;
		}
	}
	EXPECT_EQ("a\\=b\\:c\\ d", escape("a=b:c d", 1));
	EXPECT_EQ("a=b:c d", escape("a=b:c d", 0));
	EXPECT_EQ("\\ x\\ ", escape(" x ", 0));
	EXPECT_EQ("\\u0001", escape("\x01", 0));
}

TEST(Props, EscapeTruncatesLikeSnprintf)
{
	char buf[4];
	EXPECT_EQ(6u, km_props_escape(buf, sizeof(buf), "a\\b\\", 0));
	EXPECT_STREQ("a\\\\", buf);
}

} // namespace
