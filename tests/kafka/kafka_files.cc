/* The file comparisons of kafka_files.h. */
#include "tests/kafka/kafka_files.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <regex>

#include <gtest/gtest.h>

#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"

namespace kmtest {


int64_t be64(const std::string &b, size_t at)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | (uint8_t)b[at + i];
	return (int64_t)v;
}

int32_t be32(const std::string &b, size_t at)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v = v << 8 | (uint8_t)b[at + i];
	return (int32_t)v;
}

/* Every batch of a .log file; "" or where the bytes stop being batches. */
std::string parse_batches(const std::string &bytes, std::vector<Batch> *out)
{
	size_t pos = 0;

	while (pos < bytes.size()) {
		/* kmirrord's open segment written with direct I/O ends in the
		 * zeros of its last block (cut at a roll or close): not data. */
		if (bytes.size() % 4096 == 0 && bytes.size() - pos < 4096 &&
		    bytes.find_first_not_of('\0', pos) == std::string::npos)
			break;
		if (bytes.size() - pos < kHeaderBytes)
			return "a cut batch header at " + std::to_string(pos);
		Batch b;
		b.pos = pos;
		b.size = 12 + (size_t)be32(bytes, pos + kLenAt);
		if (b.size < kHeaderBytes || pos + b.size > bytes.size())
			return "a batch of " + std::to_string(b.size) +
			       " bytes at " + std::to_string(pos) + " past the end";
		b.base = be64(bytes, pos);
		b.last = b.base + be32(bytes, pos + 23);
		b.pid = be64(bytes, pos + kPidAt);
		b.control = (uint8_t)bytes[pos + 22] & 0x20; /* attributes bit 5 */
		b.attrs = (int16_t)((uint8_t)bytes[pos + kAttrAt] << 8 |
				    (uint8_t)bytes[pos + kAttrAt + 1]);
		b.base_ts = be64(bytes, pos + kBaseTsAt);
		b.max_ts = be64(bytes, pos + kMaxTsAt);
		b.count = be32(bytes, pos + kCountAt);
		out->push_back(b);
		pos += b.size;
	}
	return "";
}

/* The segment files of kind ext ("log", "index", ...) in dir, sorted. */
std::vector<std::string> files_of(const std::string &dir, const std::string &ext)
{
	std::vector<std::string> v;
	DIR *d = opendir(dir.c_str());
	struct dirent *e;
	std::string suffix = "." + ext;

	while (d && (e = readdir(d)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() == 20 + suffix.size() &&
		    n.compare(20, std::string::npos, suffix) == 0)
			v.push_back(n);
	}
	if (d)
		closedir(d);
	std::sort(v.begin(), v.end());
	return v;
}



std::string read_side(const std::string &dir, Side *s)
{
	for (auto &f : files_of(dir, "log")) {
		std::string err, b = read_file(dir + "/" + f, &err);
		if (!err.empty())
			return err;
		std::vector<Batch> bs;
		if (std::string why = parse_batches(b, &bs); !why.empty())
			return dir + "/" + f + ": " + why;
		for (auto &x : bs)
			x.pos += s->bytes.size();
		s->batches.insert(s->batches.end(), bs.begin(), bs.end());
		s->bytes += b;
	}
	return "";
}

/* Only the batches from offset `from` on take part. */
void expect_identical_from(const std::string &ours_dir,
			   const std::string &theirs_dir, int64_t from,
			   int *mapped)
{
	Side ours, theirs;
	ASSERT_EQ("", read_side(ours_dir, &ours));
	ASSERT_EQ("", read_side(theirs_dir, &theirs));
	auto before = [from](const Batch &b) { return b.last < from; };
	ours.batches.erase(std::remove_if(ours.batches.begin(), ours.batches.end(), before),
			   ours.batches.end());
	theirs.batches.erase(std::remove_if(theirs.batches.begin(), theirs.batches.end(),
					    before),
			     theirs.batches.end());
	ASSERT_FALSE(theirs.batches.empty()) << theirs_dir;
	ASSERT_EQ(theirs.batches.size(), ours.batches.size()) << ours_dir;
	for (size_t i = 0; i < ours.batches.size(); i++) {
		const Batch &a = ours.batches[i], &b = theirs.batches[i];
		ASSERT_EQ(b.base, a.base) << ours_dir << " batch " << i;
		ASSERT_EQ(b.size, a.size) << ours_dir << " at offset " << b.base;
		std::string x = ours.bytes.substr(a.pos, a.size);
		std::string y = theirs.bytes.substr(b.pos, b.size);
		if (b.pid >= 0) {
			ASSERT_EQ(-(b.pid + 2), a.pid)
				<< ours_dir << " at offset " << b.base;
			(*mapped)++;
			for (std::string *s : { &x, &y }) {
				s->replace(kPidAt, 8, 8, '\0');
				s->replace(kCrcAt, 4, 4, '\0');
			}
		}
		ASSERT_TRUE(x == y) << ours_dir << ": the batch at offset "
				    << b.base << " differs beyond producerId and crc";
	}
}

void expect_identical(const std::string &ours_dir, const std::string &theirs_dir,
		      int *mapped)
{
	expect_identical_from(ours_dir, theirs_dir, INT64_MIN, mapped);
}

/* DumpLogSegments output with what may differ masked: producerId and crc
 * (of mapped batches; unmapped ones are equal anyway), and each
 * partition's directory (`dirs`) replaced by its name. */
std::string normalised(const std::string &dump,
		       const std::vector<std::string> &dirs)
{
	std::string s = std::regex_replace(dump, std::regex("producerId: -?[0-9]+"),
					   "producerId: P");
	s = std::regex_replace(s, std::regex("crc: -?[0-9]+"), "crc: C");
	for (auto &dir : dirs) {
		std::string name = dir.substr(dir.rfind('/') + 1);
		size_t at;
		while ((at = s.find(dir + "/")) != std::string::npos)
			s.replace(at, dir.size() + 1, name + "/");
	}
	return s;
}

/* The tool's per-file complaints come out of a hash map, in an order
 * that depends on the paths: compare them as a sorted list of blocks (a
 * line and the indented lines under it). */
std::string sorted_blocks(const std::string &text)
{
	std::vector<std::string> blocks;
	size_t pos = 0;

	while (pos < text.size()) {
		size_t nl = text.find('\n', pos);
		std::string line = text.substr(pos, nl == std::string::npos ? nl : nl + 1 - pos);
		if (blocks.empty() || (line[0] != ' ' && line[0] != '\t'))
			blocks.push_back(line);
		else
			blocks.back() += line;
		pos = nl == std::string::npos ? text.size() : nl + 1;
	}
	std::sort(blocks.begin(), blocks.end());
	std::string out;
	for (auto &b : blocks)
		out += b;
	return out;
}

/* Where two long texts part, with some context of each. */
std::string first_difference(const std::string &ours, const std::string &theirs)
{
	size_t at = (size_t)(std::mismatch(ours.begin(), ours.end(), theirs.begin(),
					   theirs.end()).first - ours.begin());
	size_t from = at > 300 ? at - 300 : 0;
	return "at byte " + std::to_string(at) + " of " + std::to_string(ours.size()) +
	       "/" + std::to_string(theirs.size()) + ":\n--- ours ---\n" +
	       ours.substr(from, 900) + "\n--- Kafka's ---\n" + theirs.substr(from, 900);
}

/* Every file of these kinds in a partition directory, as paths. */
std::vector<std::string> paths_of(const std::string &dir,
				  const std::vector<std::string> &exts)
{
	std::vector<std::string> v;
	for (auto &e : exts)
		for (auto &n : files_of(dir, e))
			v.push_back(dir + "/" + n);
	std::sort(v.begin(), v.end());
	return v;
}

/* One DumpLogSegments run over a list of files (one JVM, not one per
 * file: they cost a second each). */
ChildResult dump_files(const std::vector<std::string> &files,
		       const std::vector<std::string> &flags)
{
	std::string list;
	for (auto &f : files)
		list += (list.empty() ? "" : ",") + f;
	std::vector<std::string> args = flags;
	args.push_back("--files");
	args.push_back(list);
	return kafka_dump_log_segments(args);
}

/* Kafka's verdict on our files equals its verdict on its own: the
 * records (--deep-iteration), the index, transaction index and producer
 * snapshot entries as it prints them, its index sanity check, and its
 * check of every index entry against the .log (--verify-index-only). The
 * same files must exist on both sides (segments roll at the same
 * offsets, snapshots are taken at the same offsets, a .txnindex exists
 * only for a segment holding an aborted transaction). */
void expect_kafka_reads_alike(const std::vector<std::string> &ours,
			      const std::vector<std::string> &theirs)
{
	struct Run {
		std::vector<std::string> exts, flags;
		const char *must; /* in the output of ours */
	} runs[] = {
		{ { "log", "index", "timeindex", "txnindex", "snapshot" },
		  { "--deep-iteration" }, "| offset: " },
		{ { "index", "timeindex" }, { "--index-sanity-check" }, "passed sanity check" },
		{ { "index", "timeindex" }, { "--verify-index-only" }, "Dumping" },
	};
	for (auto &run : runs) {
		std::string what = "DumpLogSegments " + run.flags[0];
		std::vector<std::string> fa, fb;
		for (size_t i = 0; i < ours.size(); i++) {
			std::vector<std::string> a = paths_of(ours[i], run.exts);
			std::vector<std::string> b = paths_of(theirs[i], run.exts);
			std::vector<std::string> na, nb;
			for (auto &f : a)
				na.push_back(f.substr(ours[i].size()));
			for (auto &f : b)
				nb.push_back(f.substr(theirs[i].size()));
			ASSERT_EQ(nb, na) << ours[i] << ": other files than Kafka's";
			fa.insert(fa.end(), a.begin(), a.end());
			fb.insert(fb.end(), b.begin(), b.end());
		}
		ChildResult a = dump_files(fa, run.flags);
		ChildResult b = dump_files(fb, run.flags);
		ASSERT_EQ(0, b.exit_code) << what << " on the broker's: " << b.describe();
		EXPECT_EQ(0, a.exit_code) << what << " on ours: " << a.describe();
		/* Kafka's own complaints (its tool reports "-1 is followed by
		 * N" for every segment not starting at 0) must be the same. */
		EXPECT_EQ(sorted_blocks(normalised(b.err, theirs)),
			  sorted_blocks(normalised(a.err, ours)))
			<< what << ": Kafka complains about our files";
		EXPECT_EQ(std::string::npos, a.err.find("Exception")) << what << a.err;
		EXPECT_EQ(std::string::npos, a.out.find("isvalid: false")) << what;
		EXPECT_EQ(std::string::npos, a.out.find("Mismatches")) << what;
		EXPECT_NE(std::string::npos, a.out.find(run.must)) << what;
		std::string x = normalised(a.out, ours), y = normalised(b.out, theirs);
		EXPECT_TRUE(x == y) << what << ": Kafka reads our files differently "
				    << first_difference(x, y);
	}
}

/* Every record of topic-p equal on the source and on kmirrord. */
void expect_same_content(const std::string &source, const std::string &mirror,
			 const std::string &topic, int p, bool read_committed)
{
	std::vector<Message> a, b;
	ConsumeSpec cs;
	cs.topic = topic;
	cs.partition = p;
	cs.read_committed = read_committed;
	ASSERT_EQ("", consume(source, cs, &a));
	ASSERT_EQ("", consume(mirror, cs, &b));
	ASSERT_FALSE(a.empty()) << topic << "-" << p;
	ASSERT_EQ(a.size(), b.size()) << topic << "-" << p;
	for (size_t i = 0; i < a.size(); i++) {
		ASSERT_EQ(a[i].offset, b[i].offset);
		ASSERT_EQ(a[i].key, b[i].key) << "offset " << a[i].offset;
		ASSERT_EQ(a[i].value, b[i].value) << "offset " << a[i].offset;
		ASSERT_EQ(a[i].headers, b[i].headers);
		ASSERT_EQ(a[i].timestamp, b[i].timestamp);
		ASSERT_EQ(a[i].timestamp_type, b[i].timestamp_type);
	}
}

/* With the broker stopped, replace its partition's segment, index,
 * snapshot, epoch and partition.metadata files by ours, so that it loads
 * and serves them (Kafka 4 sets a log whose partition.metadata names
 * another topic id aside as "-stray" and starts the partition empty). */
void give_kafka_ours(const std::string &ours, const std::string &theirs)
{
	std::vector<std::string> old = paths_of(theirs, { "log", "index", "timeindex",
							  "txnindex", "snapshot" });
	for (auto &f : old)
		ASSERT_EQ(0, unlink(f.c_str())) << f;
	std::vector<std::string> names;
	for (auto &f : paths_of(ours, { "log", "index", "timeindex", "txnindex", "snapshot" }))
		names.push_back(f.substr(ours.size() + 1));
	names.push_back("leader-epoch-checkpoint");
	names.push_back("partition.metadata");
	for (auto &n : names) {
		std::string err, b = read_file(ours + "/" + n, &err);
		ASSERT_EQ("", err);
		FILE *f = fopen((theirs + "/" + n).c_str(), "wb");
		ASSERT_NE(nullptr, f) << theirs << "/" << n;
		EXPECT_EQ(b.size(), fwrite(b.data(), 1, b.size(), f));
		EXPECT_EQ(0, fclose(f));
	}
}

} // namespace kmtest

namespace kmtest {

void expect_indexes_pass_kafkas_checks(const std::string &dir)
{
	std::vector<std::string> idx = paths_of(dir, { "index", "timeindex" });
	ASSERT_FALSE(idx.empty()) << dir;
	ChildResult a = dump_files(idx, { "--index-sanity-check" });
	EXPECT_EQ(0, a.exit_code) << a.describe();
	size_t passed = 0;
	for (const char *ok : { "passed sanity check", "is empty." })
		for (size_t at = 0; (at = a.out.find(ok, at)) != std::string::npos; at++)
			passed++;
	EXPECT_EQ(idx.size(), passed) << a.out << a.err;
	ChildResult v = dump_files(idx, { "--verify-index-only" });
	EXPECT_EQ(0, v.exit_code) << v.describe();
	EXPECT_EQ(std::string::npos, v.out.find("Mismatches")) << v.out;
	EXPECT_EQ(std::string::npos, v.err.find("Exception")) << v.err;
}

} // namespace kmtest
