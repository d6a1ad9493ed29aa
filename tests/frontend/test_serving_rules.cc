// Goal: the serving-side rules no other front-end test pins down (issue 22).
// R6: the high watermark clients see is the durable offset. While the log
// has appended past what is synced, ListOffsets LATEST answers the durable
// offset at both isolation levels, a Fetch serves no record at or past it
// (and one from an offset past it is OFFSET_OUT_OF_RANGE), and an acks=-1
// Produce is answered only once its batch, and every batch before it, is
// synced. Internal topics: a Produce to __consumer_offsets is refused with
// INVALID_TOPIC_EXCEPTION at acks 1 and -1 (the connection closed at acks
// 0), writing nothing, as Kafka's ReplicaManager refuses it ("Cannot
// append to internal topic"); the group coordinator still writes it and
// clients may read it. The offset sync from the source
// (km_frontend_group_sync): a synced offset is clamped to our durable
// offset, and never moves a group's committed offset backwards.
// Method: fe_harness.h's server with HoldDurability(): no timer or byte
// count flushes, so an acks=1 Produce leaves the appended offset ahead of
// the durable one until an acks=-1 write or a km_log_flush on the loop's
// thread syncs it. Both offsets are read through the log API before each
// request, so every check runs at a moment the test has seen; requests are
// raw frames (fe_raw.h), committed offsets are read back with OffsetFetch.
// No sleeps: waits poll an observable offset with a deadline.
#include <gtest/gtest.h>

#include <errno.h>

#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "fe_harness.h"
#include "fe_raw.h"
#include "iouring_log/log.h"
#include "kafka/proto.h"
#include "kafka/proto_group.h"
#include "kafka/records.h"

namespace {

using fetest::Bytes;
using fetest::DecodeFetch;
using fetest::FetchOut;
using fetest::FetchReq;
using fetest::MonoMs;
using fetest::Open;
using fetest::PartSpec;
using fetest::ProduceReq;
using fetest::Req;
using fetest::Resp;
using fetest::Server;

// One uncompressed batch of n records without a producer id.
Bytes Batch(int n)
{
	std::vector<std::string> vals(n);
	for (int i = 0; i < n; i++)
		vals[i] = "value-" + std::to_string(i);
	return fetest::PlainBatch(vals);
}

class Rules : public fetest::RawFixture {
protected:
	// The logs never flush on their own: a test moves the durable offset.
	void Start(const std::vector<PartSpec> &parts)
	{
		srv_.HoldDurability();
		RawFixture::Start(parts);
	}
	// One partition's Produce v7: its error code, and *base.
	int16_t Produce(const std::string &topic, int32_t partition,
			const Bytes &records, int16_t acks, int64_t *base)
	{
		Resp x;
		km_proto_topic t[2];
		km_produce_resp_part ps[2];
		km_produce_resp m = {t, 2, 0, ps, 2, 0, 0};
		*base = -2;
		RoundTrip(ProduceReq(7, 7, acks, {{topic, partition, &records}}),
			  KM_API_PRODUCE, 7, &x);
		EXPECT_EQ(0, km_produce_resp_decode(&x.r, 7, &m));
		if (m.n_parts != 1)
			return -999;
		*base = ps[0].base_offset;
		return ps[0].error_code;
	}
	// ListOffsets LATEST of t-partition at version ver.
	int64_t Latest(const std::string &topic, int32_t partition, int16_t ver,
		       int8_t isolation)
	{
		Resp x;
		km_proto_topic t = {};
		km_listoffsets_req_part q[1] = {{partition, -1, -1, 1}};
		km_listoffsets_req req = {};
		km_wire_name_set(&t.name, topic.c_str());
		t.count = 1;
		req.replica_id = -1;
		req.isolation_level = isolation;
		req.topics = &t;
		req.topics_max = req.n_topics = 1;
		req.parts = q;
		req.parts_max = req.n_parts = 1;
		RoundTrip(Req(KM_API_LIST_OFFSETS, ver, 6,
			      [&](km_wire_wr *w) {
				      km_listoffsets_req_encode(w, ver, &req);
			      }),
			  KM_API_LIST_OFFSETS, ver, &x);
		km_proto_topic rt[2];
		km_listoffsets_resp_part rp[2];
		km_listoffsets_resp m = {0, rt, 2, 0, rp, 2, 0};
		EXPECT_EQ(0, km_listoffsets_resp_decode(&x.r, ver, &m));
		EXPECT_EQ(1u, m.n_parts);
		EXPECT_EQ(KM_KERR_NONE, rp[0].error_code);
		return m.n_parts == 1 ? rp[0].offset : -999;
	}
	void Fetch(const std::string &topic, int32_t partition, int64_t offset,
		   int16_t ver, int8_t isolation, FetchOut::Part *out)
	{
		Resp x;
		FetchOut f;
		RoundTrip(FetchReq(9, ver, 0, 1 << 20,
				   {{topic, partition, offset, 1 << 20}}, 0, -1,
				   isolation),
			  KM_API_FETCH, ver, &x);
		ASSERT_NO_FATAL_FAILURE(DecodeFetch(&x, ver, &f));
		ASSERT_EQ(1u, f.parts.size());
		*out = f.parts[0];
	}
	// The group's committed offset of topic-partition (OffsetFetch v5).
	int64_t Committed(const std::string &group, const std::string &topic,
			  int32_t partition)
	{
		int32_t parts[1] = {partition};
		km_proto_topic ft[1] = {};
		km_offfetch_req q = {};
		km_wire_name_set(&ft[0].name, topic.c_str());
		ft[0].count = 1;
		km_wire_name_set(&q.group_id, group.c_str());
		q.topics = ft;
		q.topics_max = q.n_topics = 1;
		q.parts = parts;
		q.parts_max = q.n_parts = 1;
		Resp x;
		RoundTrip(Req(KM_API_OFFSET_FETCH, 5, 11,
			      [&](km_wire_wr *w) {
				      km_offfetch_req_encode(w, 5, &q);
			      }),
			  KM_API_OFFSET_FETCH, 5, &x);
		km_proto_topic rt[2];
		km_offfetch_resp_part rp[2];
		km_offfetch_resp m = {};
		m.topics = rt;
		m.topics_max = 2;
		m.parts = rp;
		m.parts_max = 2;
		EXPECT_EQ(0, km_offfetch_resp_decode(&x.r, 5, &m));
		EXPECT_EQ(KM_KERR_NONE, m.error_code);
		EXPECT_EQ(1u, m.n_parts);
		return m.n_parts == 1 ? rp[0].committed_offset : -999;
	}
	// Poll until the log has appended (written, not synced) up to end.
	void UntilAppended(km_log *log, int64_t end)
	{
		uint64_t deadline = MonoMs() + 10000;
		while (km_log_appended_offset(log) < end && MonoMs() < deadline)
			srv_.Run([] {}); // one turn of the loop
		ASSERT_EQ(end, km_log_appended_offset(log));
	}
	// Sync partition i and wait until all of it is durable.
	void Flush(size_t i)
	{
		km_log *log = srv_.log(i);
		srv_.Run([&] { ASSERT_EQ(0, km_log_flush(log)); });
		uint64_t deadline = MonoMs() + 10000;
		int64_t end = srv_.EndOffset(i);
		while (km_log_durable_offset(log) < end && MonoMs() < deadline)
			srv_.Run([] {});
		ASSERT_EQ(end, km_log_durable_offset(log));
	}
};

// R6 at a moment the test holds: 7 offsets appended, 3 synced.
TEST_F(Rules, ClientsSeeOnlyTheDurableOffset)
{
	ASSERT_NO_FATAL_FAILURE(Start({{"t", 0, true}}));
	km_log *log = srv_.log(srv_.index("t", 0));
	int64_t base;

	// acks=-1: the answer means synced.
	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(3), -1, &base));
	EXPECT_EQ(0, base);
	EXPECT_EQ(3, km_log_durable_offset(log))
		<< "acks=-1 answered before its batch was synced";
	// acks=1: answered once appended; nothing syncs it here.
	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(4), 1, &base));
	EXPECT_EQ(3, base);
	ASSERT_NO_FATAL_FAILURE(UntilAppended(log, 7));
	ASSERT_EQ(3, km_log_durable_offset(log))
		<< "something synced: the gap this test needs is gone";

	for (int16_t ver : {1, 2, 5}) {
		EXPECT_EQ(3, Latest("t", 0, ver, 0)) << "v" << ver;
		if (ver >= 2) {
			EXPECT_EQ(3, Latest("t", 0, ver, 1)) << "v" << ver;
		}
	}
	for (int16_t ver : {4, 11}) {
		for (int8_t iso : {0, 1}) {
			SCOPED_TRACE("fetch v" + std::to_string(ver) +
				     " isolation " + std::to_string(iso));
			FetchOut::Part p;
			ASSERT_NO_FATAL_FAILURE(Fetch("t", 0, 0, ver, iso, &p));
			EXPECT_EQ(KM_KERR_NONE, p.error);
			EXPECT_EQ(3, p.hw);
			EXPECT_EQ(3, p.lso);
			ASSERT_EQ(std::vector<int64_t>{0}, p.batch_bases);
			EXPECT_EQ(2, p.batch_lasts.back());
			// At the durable offset: nothing yet, no error.
			ASSERT_NO_FATAL_FAILURE(Fetch("t", 0, 3, ver, iso, &p));
			EXPECT_EQ(KM_KERR_NONE, p.error);
			EXPECT_EQ(3, p.hw);
			EXPECT_EQ(0u, p.bytes);
			// Appended but not synced: past what exists for a client.
			ASSERT_NO_FATAL_FAILURE(Fetch("t", 0, 5, ver, iso, &p));
			EXPECT_EQ(KM_KERR_OFFSET_OUT_OF_RANGE, p.error);
			EXPECT_EQ(0u, p.bytes);
		}
	}
	ASSERT_EQ(3, km_log_durable_offset(log)) << "the checks ran held";

	// acks=-1 behind the held batch: answered once both are synced (an
	// acks=-1 answered as acks=1 would leave the log at 3 synced, as
	// nothing else syncs here).
	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(1), -1, &base));
	EXPECT_EQ(7, base);
	EXPECT_EQ(8, km_log_durable_offset(log))
		<< "acks=-1 answered before its batch was synced";
	EXPECT_EQ(8, Latest("t", 0, 5, 0));
	FetchOut::Part p;
	ASSERT_NO_FATAL_FAILURE(Fetch("t", 0, 3, 11, 0, &p));
	EXPECT_EQ(8, p.hw);
	EXPECT_EQ((std::vector<int64_t>{3, 7}), p.batch_bases);
}

// The coordinator's own partition takes no client Produce, at any acks;
// the coordinator still writes it and clients may read it.
TEST_F(Rules, ProduceToAnInternalTopicIsRefused)
{
	PartSpec offsets = {"__consumer_offsets", 0, true};
	offsets.internal = true;
	ASSERT_NO_FATAL_FAILURE(Start({offsets, {"t", 0, true}}));
	const size_t oi = srv_.index("__consumer_offsets", 0);
	int64_t base;

	for (int16_t acks : {1, -1}) {
		EXPECT_EQ(KM_KERR_INVALID_TOPIC_EXCEPTION,
			  Produce("__consumer_offsets", 0, Batch(2), acks, &base))
			<< "acks=" << acks;
		EXPECT_EQ(-1, base);
	}
	EXPECT_EQ(0, srv_.EndOffset(oi));
	EXPECT_EQ(0u, srv_.ProduceCalls(oi));

	// The coordinator's commit lands in it (a sync from the source is
	// one such write), and a client reads it back.
	km_group_sync_part sp = {};
	snprintf(sp.topic, sizeof(sp.topic), "t");
	sp.partition = 0;
	sp.source_offset = 0;
	sp.leader_epoch = -1;
	km_group_sync s = {};
	snprintf(s.group, sizeof(s.group), "g");
	s.parts = &sp;
	s.n_parts = 1;
	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(2), -1, &base));
	ASSERT_EQ(0, srv_.GroupSync(&s, 10000));
	EXPECT_EQ(0, sp.stored);
	EXPECT_EQ(1, srv_.EndOffset(oi));
	EXPECT_EQ(0, Committed("g", "t", 0));
	FetchOut::Part p;
	ASSERT_NO_FATAL_FAILURE(Fetch("__consumer_offsets", 0, 0, 11, 0, &p));
	EXPECT_EQ(KM_KERR_NONE, p.error);
	EXPECT_EQ(std::vector<int64_t>{0}, p.batch_bases);

	// acks=0 has no answer to carry the refusal: the connection closes.
	const uint64_t calls = srv_.ProduceCalls(oi); // the coordinator's
	const Bytes two = Batch(2);
	ASSERT_TRUE(c_.Send(ProduceReq(8, 7, 0,
				       {{"__consumer_offsets", 0, &two}})));
	EXPECT_TRUE(c_.WaitClosed());
	EXPECT_EQ(1, srv_.EndOffset(oi));
	EXPECT_EQ(calls, srv_.ProduceCalls(oi));
}

// A synced offset goes no further than what clients can read here (the
// durable offset, not the appended one), and never moves a group back.
TEST_F(Rules, OffsetSyncIsClampedAndNeverGoesBack)
{
	PartSpec offsets = {"__consumer_offsets", 0, true};
	offsets.internal = true;
	ASSERT_NO_FATAL_FAILURE(Start({offsets, {"t", 0, true}}));
	km_log *log = srv_.log(srv_.index("t", 0));
	int64_t base;

	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(10), -1, &base));
	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(5), 1, &base));
	ASSERT_NO_FATAL_FAILURE(UntilAppended(log, 15));
	ASSERT_EQ(10, km_log_durable_offset(log));

	km_group_sync_part sp = {};
	snprintf(sp.topic, sizeof(sp.topic), "t");
	sp.partition = 0;
	sp.leader_epoch = -1;
	km_group_sync s = {};
	snprintf(s.group, sizeof(s.group), "g");
	s.parts = &sp;
	s.n_parts = 1;
	struct Step {
		int64_t source, stored;
		const char *why;
	};
	auto run = [&](const Step &st) {
		SCOPED_TRACE(st.why);
		sp.source_offset = st.source;
		sp.stored = sp.previous = -2;
		ASSERT_EQ(0, srv_.GroupSync(&s, 10000));
		EXPECT_EQ(st.stored, sp.stored);
		EXPECT_EQ(st.stored, Committed("g", "t", 0));
	};
	// The source is ahead of us: up to our durable offset, not the
	// appended one a consumer would be told is out of range.
	ASSERT_NO_FATAL_FAILURE(run({100, 10, "source past our log end"}));
	ASSERT_EQ(15, km_log_appended_offset(log));
	ASSERT_EQ(10, km_log_durable_offset(log)) << "the sync ran held";
	ASSERT_NO_FATAL_FAILURE(run({12, 10, "source between durable and appended"}));
	// Behind what the group has here: it stays.
	ASSERT_NO_FATAL_FAILURE(run({4, 10, "source behind the group"}));
	ASSERT_NO_FATAL_FAILURE(run({0, 10, "source at 0"}));
	// Once synced, the clamp moves with the durable offset.
	ASSERT_NO_FATAL_FAILURE(Flush(srv_.index("t", 0)));
	ASSERT_NO_FATAL_FAILURE(run({12, 12, "source within our log"}));
	ASSERT_NO_FATAL_FAILURE(run({100, 15, "source past our log end"}));
	ASSERT_NO_FATAL_FAILURE(run({13, 15, "source behind the group"}));
}

} // namespace

// A stop's last sync (at_stop) stores nothing past the stop's cut, whose
// offsets what is written here next takes; an offset already here past the
// cut is brought down to it, never below it; under the cut, never back.
TEST_F(Rules, StopSyncIsCappedAtTheCut)
{
	PartSpec offsets = {"__consumer_offsets", 0, true};
	offsets.internal = true;
	ASSERT_NO_FATAL_FAILURE(Start({offsets, {"t", 0, true}}));
	km_log *log = srv_.log(srv_.index("t", 0));
	int64_t base;

	ASSERT_EQ(KM_KERR_NONE, Produce("t", 0, Batch(15), -1, &base));
	ASSERT_EQ(15, km_log_durable_offset(log));

	km_group_sync_part sp = {};
	snprintf(sp.topic, sizeof(sp.topic), "t");
	sp.partition = 0;
	sp.leader_epoch = -1;
	km_group_sync s = {};
	snprintf(s.group, sizeof(s.group), "g");
	s.parts = &sp;
	s.n_parts = 1;
	struct Step {
		bool at_stop;
		int64_t cut, source, stored;
		const char *why;
	};
	auto run = [&](const Step &st) {
		SCOPED_TRACE(st.why);
		sp.at_stop = st.at_stop;
		sp.cut = st.cut;
		sp.source_offset = st.source;
		sp.stored = sp.previous = -2;
		ASSERT_EQ(0, srv_.GroupSync(&s, 10000));
		EXPECT_EQ(st.stored, sp.stored);
		EXPECT_EQ(st.stored, Committed("g", "t", 0));
	};
	ASSERT_NO_FATAL_FAILURE(run({true, 8, 12, 8, "source past the cut"}));
	ASSERT_NO_FATAL_FAILURE(run({true, 8, 100, 8, "source past our log end"}));
	ASSERT_NO_FATAL_FAILURE(run({true, 8, 5, 8, "source behind the group"}));
	// A periodic sync (before the stop) took the group to 14; the stop
	// cut at 9.
	ASSERT_NO_FATAL_FAILURE(run({false, 0, 14, 14, "periodic: no cut"}));
	ASSERT_NO_FATAL_FAILURE(run({true, 9, 14, 9, "down to the cut"}));
	ASSERT_NO_FATAL_FAILURE(run({false, 0, 14, 14, "periodic again"}));
	ASSERT_NO_FATAL_FAILURE(run({true, 9, 3, 9, "down to the cut, not below"}));
}
