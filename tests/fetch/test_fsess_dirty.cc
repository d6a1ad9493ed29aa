// Goal: an incremental Fetch is built from the session's dirty list
// (dataplane/fetch/fsess_dirty.c, issue 17), and still says what KIP-227
// asks: it carries exactly the partitions whose line moved (fetch offset)
// since the broker last heard it; a partition whose position the broker's
// session already holds is left out; a partition not ready this time, or
// one that left, goes into ForgottenTopicsData; and the broker's answer
// naming a partition the request left out reaches it (the session's
// index). Work: a Fetch among 200 members of which one moved looks at the
// dirty list only (n_dirty before the build), and answers that leave the
// quiet members out count as Fetch answers for them (stats.fetches, which
// a planned stop waits on).
// Method: a pool over caller memory with one session and 200 members of
// topic "t" attached as a worker attaches them (km_fsess_attach), set
// ready to fetch; each Fetch encoded by km_fsess_encode as it goes on the
// wire and decoded back with km_fetch_req_decode; each answer encoded with
// the front end's encoder (no records: a partition's new position is set
// as appending its records would, without the event that appending has)
// and handed to km_fsess_on_fetch. No network, no sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "dataplane/fetch/fsess.h"
// fetcher_pvt.h has no C++ guard of its own (fsess.h, first, has).
extern "C" {
#include "dataplane/fetch/fetcher_pvt.h"
}

namespace {

constexpr int kMembers = 200;
constexpr int32_t kSession = 4242;

using V = std::vector<int32_t>;

struct Sent {
	int32_t session_id = 0, epoch = 0;
	V written, forgotten;
	std::vector<int64_t> offsets; // of written
};

class FsessDirty : public ::testing::Test {
protected:
	void SetUp() override
	{
		scratch_.reset(new km_fetcher_scratch());
		km_fsess_pool_config pc = {};
		pc.sessions_max = 1;
		pc.rx_buf_bytes = 1 << 20;
		pc.rx_bufs_max = 16;
		pc.scratch = scratch_.get();
		mem_.resize(km_fsess_pool_memsize(1));
		// The net is only stored: nothing connects here.
		ASSERT_EQ(0, km_fsess_pool_init(&pool_, &pc,
						reinterpret_cast<km_net *>(&net_),
						mem_.data()));
		for (int i = 0; i < kMembers; i++) {
			f_.emplace_back(new km_fetcher());
			km_fetcher *f = f_.back().get();
			snprintf(f->cfg.topic, sizeof(f->cfg.topic), "t");
			f->cfg.partition = i;
			f->cfg.max_bytes = 1 << 20;
			f->cfg.backoff_ms = 100;
			f->cfg.backoff_max_ms = 1000;
			f->cfg.max_wait_ms = 500;
			f->cfg.n_bootstrap = 0;
			f->pool = &pool_;
			f->ask_slot = -1;
			ASSERT_EQ(0, km_fsess_attach(&pool_, f));
		}
		s_ = &pool_.sess[0];
		ASSERT_EQ((uint32_t)kMembers, s_->n_members);
		s_->pinned = true;
		s_->versions_known = true;
		s_->v_fetch = 11; // the highest the decoder (a server's) takes
		s_->max_wait_ms = 500;
		for (int i = 0; i < kMembers; i++) {
			km_fetcher *f = f_[i].get();
			f->phase = KM_FP_FETCH;
			f->state = KM_FETCHER_MIRRORING;
			f->next_offset = 1000 + i;
			f->inflight_offset = -1;
		}
	}

	// The next Fetch as the broker reads it.
	Sent Fetch()
	{
		km_wire_wr w;
		EXPECT_EQ(KM_FREQ_FETCH, km_fsess_choose(s_, km_fetcher_now_ms()));
		EXPECT_EQ(0, km_fsess_encode(s_, &w, KM_FREQ_FETCH));
		iovec iv = { s_->req + 4, w.pos - 4 }; // after the size
		km_chain ch = { &iv, 1 };
		km_wire_rd r;
		km_reqhdr h;
		km_wire_rd_init(&r, &ch, km_chain_start(&ch), (uint32_t)iv.iov_len,
				&km_wire_limits_default);
		EXPECT_EQ(0, km_reqhdr_decode(&r, &h));
		EXPECT_EQ(KM_API_FETCH, h.api_key);
		km_proto_topic t[8], ft[8];
		km_fetch_req_part p[KM_FETCHER_ASK_MAX];
		int32_t fp[KM_FETCHER_ASK_MAX];
		km_fetch_req q = {};
		q.topics = t;
		q.topics_max = 8;
		q.parts = p;
		q.parts_max = KM_FETCHER_ASK_MAX;
		q.forgotten = ft;
		q.forgotten_max = 8;
		q.forgotten_parts = fp;
		q.forgotten_parts_max = KM_FETCHER_ASK_MAX;
		EXPECT_EQ(0, km_fetch_req_decode(&r, h.api_version, &q));
		Sent out;
		out.session_id = q.session_id;
		out.epoch = q.session_epoch;
		for (uint32_t i = 0; i < q.n_parts; i++) {
			out.written.push_back(p[i].partition);
			out.offsets.push_back(p[i].fetch_offset);
		}
		for (uint32_t i = 0; i < q.n_forgotten_parts; i++)
			out.forgotten.push_back(fp[i]);
		std::sort(out.forgotten.begin(), out.forgotten.end());
		inflight_ver_ = h.api_version;
		return out;
	}

	// The broker answers the Fetch in flight naming `named` (no records,
	// a new high watermark each), with session id kSession.
	void Answer(const V &named)
	{
		std::vector<uint8_t> buf(1 << 16);
		km_wire_wr w;
		km_wire_wr_init(&w, buf.data(), buf.size());
		km_proto_enc e;
		km_wire_name topic;
		km_wire_name_set(&topic, "t");
		ASSERT_EQ(0, km_fetch_resp_enc_begin(&e, &w, inflight_ver_, 0, 0,
						     kSession));
		if (!named.empty()) {
			ASSERT_EQ(0, km_fetch_resp_enc_topic(&e, &topic));
		}
		for (int32_t n : named) {
			km_fetch_part p = {};
			p.partition = n;
			p.high_watermark = p.last_stable_offset = 5000 + hw_++;
			p.log_start_offset = 0;
			p.n_aborted = -1;
			p.preferred_read_replica = -1;
			ASSERT_EQ(0, km_fetch_resp_enc_partition(&e, &p, nullptr, 0));
		}
		ASSERT_EQ(0, km_fetch_resp_enc_end(&e));
		iovec iv = { buf.data(), w.pos };
		km_chain ch = { &iv, 1 };
		km_wire_rd r;
		km_wire_rd_init(&r, &ch, km_chain_start(&ch), (uint32_t)w.pos,
				&km_wire_limits_default);
		km_kframe_frame fr = {};
		s_->inflight = KM_FREQ_NONE; // as handle_frame does
		EXPECT_FALSE(km_fsess_on_fetch(s_, &fr, &r)) << "no records held";
	}

	// The answer names `named`, then appending their records moves each
	// one's position by its `by` (fetcher_data.c does it as it parses).
	void Answer_then_move(const V &named, const std::vector<int64_t> &by)
	{
		Answer(named);
		for (size_t i = 0; i < named.size(); i++)
			F(named[i])->next_offset += by[i];
	}

	km_fetcher *F(int i) { return f_[i].get(); }

	int net_ = 0;
	km_fsess_pool pool_ = {};
	std::vector<uint8_t> mem_;
	std::unique_ptr<km_fetcher_scratch> scratch_;
	km_fsess *s_ = nullptr;
	std::vector<std::unique_ptr<km_fetcher>> f_;
	int16_t inflight_ver_ = 0;
	int64_t hw_ = 0;
};

V Sorted(V v)
{
	std::sort(v.begin(), v.end());
	return v;
}

V All()
{
	V v;
	for (int i = 0; i < kMembers; i++)
		v.push_back(i);
	return v;
}

TEST_F(FsessDirty, IncrementalCarriesExactlyWhatMoved)
{
	Sent a = Fetch();
	EXPECT_EQ(0, a.epoch) << "the first Fetch is full";
	EXPECT_EQ(All(), Sorted(a.written));
	Answer(All()); // a full answer names every partition

	// Nothing moved: an incremental Fetch with no partition (a long poll
	// on the broker's session); after it every line is the broker's.
	Sent b = Fetch();
	EXPECT_EQ(kSession, b.session_id);
	EXPECT_EQ(1, b.epoch);
	EXPECT_TRUE(b.written.empty());
	EXPECT_TRUE(b.forgotten.empty());
	EXPECT_EQ(0u, s_->n_dirty);

	// Records came for 7 and 150: the answer named them, and appending
	// moved their position (no event of its own).
	Answer_then_move({ 7, 150 }, { 17, 30 });
	EXPECT_EQ(2u, s_->n_dirty) << "only the two named are looked at";
	Sent c = Fetch();
	EXPECT_EQ(2, c.epoch);
	EXPECT_EQ(V({ 7, 150 }), Sorted(c.written));
	std::vector<int64_t> offs = c.offsets;
	std::sort(offs.begin(), offs.end());
	EXPECT_EQ(std::vector<int64_t>({ 1007 + 17, 1150 + 30 }), offs);
	EXPECT_TRUE(c.forgotten.empty());
	EXPECT_EQ(0u, s_->n_dirty);

	// A high watermark moved for 9 (named), its position did not: the
	// broker's session holds it, so the Fetch leaves it out.
	Answer_then_move({ 9 }, { 0 });
	Sent d = Fetch();
	EXPECT_EQ(3, d.epoch);
	EXPECT_TRUE(d.written.empty()) << "9's fetch offset is the broker's";
	EXPECT_EQ(5000 + hw_ - 1, F(9)->stats.high_watermark);
}

TEST_F(FsessDirty, NotReadyAndLeftAreForgotten)
{
	Fetch();
	Answer(All());
	Fetch();
	Answer({});

	// 3 backs off after an error, 4 is stopped (not yet swept out): each
	// an event that touches it.
	F(3)->ready_at_ms = km_fetcher_now_ms() + 60000;
	km_fetcher_touch(F(3), true);
	F(4)->phase = KM_FP_DONE;
	km_fetcher_touch(F(4), true);
	Sent a = Fetch();
	EXPECT_EQ(V({ 3, 4 }), a.forgotten);
	EXPECT_TRUE(a.written.empty());
	EXPECT_FALSE(F(3)->fs_in);
	EXPECT_EQ(2u, s_->n_dirty) << "3 and 4 stay on the list, not ready";
	Answer({});

	// 3 is ready again: written whole, at its position.
	F(3)->ready_at_ms = 0;
	Sent b = Fetch();
	EXPECT_EQ(V({ 3 }), b.written);
	EXPECT_EQ(std::vector<int64_t>({ 1003 }), b.offsets);
	EXPECT_TRUE(b.forgotten.empty());
}

TEST_F(FsessDirty, AnswerReachesAPartitionTheFetchLeftOut)
{
	Fetch();
	Answer(All());
	Fetch(); // looks at the 200 the full answer named, writes none
	Answer({});
	Sent a = Fetch();
	ASSERT_TRUE(a.written.empty());
	ASSERT_EQ(0u, s_->n_asked) << "120 is asked without a word";
	uint64_t before = km_fetcher_get_stats(F(120))->fetches;
	int64_t hw = 5000 + hw_;
	Answer({ 120 }); // 120 was in the broker's session, not in the request
	EXPECT_EQ(hw, F(120)->stats.high_watermark);
	EXPECT_EQ(before + 1, km_fetcher_get_stats(F(120))->fetches);
	EXPECT_TRUE(F(120)->dirty) << "its line is looked at next time";
}

TEST_F(FsessDirty, AnswersLeavingQuietMembersOutCountForThem)
{
	Fetch();
	Answer(All());
	uint64_t f50 = km_fetcher_get_stats(F(50))->fetches;
	for (int i = 0; i < 5; i++) {
		Fetch();
		Answer({ 1 });
		// 1's position moved as its records were appended.
		F(1)->next_offset++;
	}
	EXPECT_EQ(f50 + 5, km_fetcher_get_stats(F(50))->fetches)
		<< "five answers, each saying 50 is unchanged";
	EXPECT_EQ(1u + 5u, km_fetcher_get_stats(F(1))->fetches);
}

} // namespace
