/* Kafka's files on both sides, compared: the helpers the kafka suites
 * share to hold kmirror's partition directories against a real broker's
 * (moved out of test_kafka_source.cc so that every suite judges bytes the
 * same way). googletest assertions inside: call them from a test body
 * (ASSERT_NO_FATAL_FAILURE where a later step needs them to pass).
 */
#ifndef KM_TESTS_KAFKA_KAFKA_FILES_H
#define KM_TESTS_KAFKA_KAFKA_FILES_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace kmtest {

/* Offsets in a v2 batch header (Kafka's DefaultRecordBatch). */
constexpr size_t kLenAt = 8, kCrcAt = 17, kAttrAt = 21, kBaseTsAt = 27,
		 kMaxTsAt = 35, kPidAt = 43, kCountAt = 57, kHeaderBytes = 61;

struct Batch {
	int64_t base = 0, last = 0, pid = -1;
	bool control = false;
	size_t pos = 0, size = 0; /* in the file */
	int16_t attrs = 0;
	int64_t base_ts = -1; /* the delete horizon when attrs bit 6 is set */
	int64_t max_ts = -1;
	int32_t count = 0;
};

/* Both sides' batches, one partition. */
struct Side {
	std::string bytes; /* every .log file, in order */
	std::vector<Batch> batches;
};

/* Big-endian integers of Kafka's formats at `at` in b. */
int64_t be64(const std::string &b, size_t at);
int32_t be32(const std::string &b, size_t at);
/* Every batch of a .log file; "" or where the bytes stop being batches. */
std::string parse_batches(const std::string &bytes, std::vector<Batch> *out);
/* The segment files of kind ext ("log", "index", ...) in dir, sorted. */
std::vector<std::string> files_of(const std::string &dir, const std::string &ext);
/* Every .log file of a partition directory, in offset order. */
std::string read_side(const std::string &dir, Side *s);

/* The byte-identity rule: kmirror's batches for the same offsets equal
 * the broker's except producerId -> -(p+2) and the CRC in mapped ones.
 * Counts the mapped batches in *mapped. */
void expect_identical(const std::string &ours_dir, const std::string &theirs_dir,
		      int *mapped);
/* The same over the batches both sides hold from offset `from` on. */
void expect_identical_from(const std::string &ours_dir,
			   const std::string &theirs_dir, int64_t from,
			   int *mapped);

/* DumpLogSegments output with producerId, crc and the partition
 * directories (`dirs`, replaced by their names) masked. */
std::string normalised(const std::string &dump,
		       const std::vector<std::string> &dirs);
/* A text's blocks (a line and the indented lines under it), sorted. */
std::string sorted_blocks(const std::string &text);
/* Where two long texts part, with some context of each. */
std::string first_difference(const std::string &ours, const std::string &theirs);
/* Every file of these kinds in a partition directory, as paths. */
std::vector<std::string> paths_of(const std::string &dir,
				  const std::vector<std::string> &exts);
/* One DumpLogSegments run over a list of files. */
ChildResult dump_files(const std::vector<std::string> &files,
		       const std::vector<std::string> &flags);
/* Kafka's DumpLogSegments reads our files as it reads its own (the same
 * files on both sides, the same output once masked). */
void expect_kafka_reads_alike(const std::vector<std::string> &ours,
			      const std::vector<std::string> &theirs);

/* Every record of topic-p equal on the source and on kmirrord. */
void expect_same_content(const std::string &source, const std::string &mirror,
			 const std::string &topic, int p, bool read_committed);

/* With the broker stopped, its partition directory `theirs` gets our
 * segment, index, snapshot, epoch and partition.metadata files in place
 * of its own, so that it loads and serves them when started. */
void give_kafka_ours(const std::string &ours, const std::string &theirs);

} // namespace kmtest


namespace kmtest {

/* Kafka's checks of a partition directory's indexes (DumpLogSegments
 * --index-sanity-check passes or finds it empty for every .index and
 * .timeindex; --verify-index-only finds no entry mismatching the .log). */
void expect_indexes_pass_kafkas_checks(const std::string &dir);

} // namespace kmtest

#endif
