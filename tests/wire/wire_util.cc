// Dumps and decode paths for the wire tests; see wire_util.h.
#include "wire_util.h"

#include <cstdio>
#include <vector>

namespace wt {

std::string Hex(const uint8_t *p, size_t n)
{
	std::string s;
	char buf[4];
	for (size_t i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "%02x", p[i]);
		s += buf;
	}
	return s;
}

std::string Err(int rc)
{
	return "ERR " + std::to_string(rc) + " " + km_strerror(rc);
}

std::string DumpName(const km_wire_name &n)
{
	if (n.len < 0)
		return "null";
	return "\"" + std::string(n.s, (size_t)n.len) + "\"";
}

std::string DumpSpan(const km_chain *c, const km_wire_span &s)
{
	if (s.len < 0)
		return "null";
	Bytes b((size_t)s.len);
	size_t got = km_wire_span_copy(c, &s, b.data(), b.size());
	return "@" + std::to_string(s.off) + ":" + Hex(b.data(), got);
}

std::string Dump(const km_reqhdr &h)
{
	std::ostringstream o;
	o << "hdr{key=" << h.api_key << " ver=" << h.api_version
	  << " corr=" << h.correlation_id << " client=" << DumpName(h.client_id)
	  << (h.client_id_truncated ? " (truncated)" : "") << "}";
	return o.str();
}

std::string Dump(const km_apiversions_req &m)
{
	return "apiversions_req{sw=" + DumpName(m.sw_name) + " " +
	       DumpName(m.sw_version) + "}";
}

std::string Dump(const km_apiversions_resp &m)
{
	std::ostringstream o;
	o << "apiversions_resp{err=" << m.error_code << " keys=[";
	for (uint32_t i = 0; i < m.n_keys; i++)
		o << "(" << m.keys[i].api_key << "," << m.keys[i].min_version
		  << "," << m.keys[i].max_version << ")";
	o << "] throttle=" << m.throttle_time_ms << "}";
	return o.str();
}

std::string Dump(const km_metadata_req &m)
{
	std::ostringstream o;
	o << "metadata_req{n=" << m.n_topics << " [";
	for (int32_t i = 0; i < m.n_topics; i++)
		o << DumpName(m.topics[i]) << " ";
	o << "] auto=" << m.allow_auto_topic_creation << "}";
	return o.str();
}

static std::string Nodes(const km_metadata_resp &m, uint32_t first,
			 uint32_t count)
{
	std::ostringstream o;
	o << "[";
	for (uint32_t i = 0; i < count; i++)
		o << m.nodes[first + i] << (i + 1 < count ? "," : "");
	o << "]";
	return o.str();
}

std::string Dump(const km_metadata_resp &m)
{
	std::ostringstream o;
	o << "metadata_resp{throttle=" << m.throttle_time_ms << " brokers=[";
	for (uint32_t i = 0; i < m.n_brokers; i++) {
		const km_metadata_broker &b = m.brokers[i];
		o << "(" << b.node_id << " " << DumpName(b.host) << ":" << b.port
		  << " rack=" << DumpName(b.rack) << ")";
	}
	o << "] cluster=" << DumpName(m.cluster_id)
	  << " controller=" << m.controller_id << " topics=[";
	for (uint32_t i = 0; i < m.n_topics; i++) {
		const km_metadata_topic &t = m.topics[i];
		o << "(err=" << t.error_code << " " << DumpName(t.name);
		// Printed only when given (v10+), so older dumps read as before.
		uint8_t any = 0;
		for (uint8_t b : t.topic_id)
			any |= b;
		if (any) {
			o << " id=";
			for (uint8_t b : t.topic_id)
				o << (int)b << ".";
		}
		o << " internal=" << t.is_internal << " parts=[";
		for (uint32_t j = 0; j < t.count; j++) {
			const km_metadata_part &p = m.parts[t.first + j];
			o << "(err=" << p.error_code << " p=" << p.partition
			  << " leader=" << p.leader_id;
			if (p.leader_epoch != -1) // v7+
				o << " epoch=" << p.leader_epoch;
			o << " replicas="
			  << Nodes(m, p.replicas_first, p.replicas_count)
			  << " isr=" << Nodes(m, p.isr_first, p.isr_count)
			  << ")";
		}
		o << "])";
	}
	o << "]}";
	return o.str();
}

static std::string Topic(const km_proto_topic &t)
{
	return DumpName(t.name) + "[" + std::to_string(t.first) + "+" +
	       std::to_string(t.count) + "]";
}

std::string Dump(const km_listoffsets_req &m)
{
	std::ostringstream o;
	o << "listoffsets_req{replica=" << m.replica_id
	  << " iso=" << (int)m.isolation_level << " topics=[";
	for (uint32_t i = 0; i < m.n_topics; i++)
		o << Topic(m.topics[i]) << " ";
	o << "] parts=[";
	for (uint32_t i = 0; i < m.n_parts; i++) {
		const km_listoffsets_req_part &p = m.parts[i];
		o << "(" << p.partition << " epoch=" << p.current_leader_epoch
		  << " ts=" << p.timestamp << " max=" << p.max_num_offsets
		  << ")";
	}
	o << "]}";
	return o.str();
}

std::string Dump(const km_listoffsets_resp &m)
{
	std::ostringstream o;
	o << "listoffsets_resp{throttle=" << m.throttle_time_ms << " topics=[";
	for (uint32_t i = 0; i < m.n_topics; i++)
		o << Topic(m.topics[i]) << " ";
	o << "] parts=[";
	for (uint32_t i = 0; i < m.n_parts; i++) {
		const km_listoffsets_resp_part &p = m.parts[i];
		o << "(" << p.partition << " err=" << p.error_code
		  << " old=" << p.old_offsets_count << " ts=" << p.timestamp
		  << " off=" << p.offset << " epoch=" << p.leader_epoch << ")";
	}
	o << "]}";
	return o.str();
}

std::string Dump(const km_fetch_req &m)
{
	std::ostringstream o;
	o << "fetch_req{replica=" << m.replica_id << " wait=" << m.max_wait_ms
	  << " min=" << m.min_bytes << " max=" << m.max_bytes
	  << " iso=" << (int)m.isolation_level << " session=" << m.session_id
	  << "/" << m.session_epoch << " topics=[";
	for (uint32_t i = 0; i < m.n_topics; i++)
		o << Topic(m.topics[i]) << " ";
	o << "] parts=[";
	for (uint32_t i = 0; i < m.n_parts; i++) {
		const km_fetch_req_part &p = m.parts[i];
		o << "(" << p.partition << " epoch=" << p.current_leader_epoch
		  << " off=" << p.fetch_offset << " lso=" << p.log_start_offset
		  << " max=" << p.partition_max_bytes << ")";
	}
	o << "] forgotten=[";
	for (uint32_t i = 0; i < m.n_forgotten; i++)
		o << Topic(m.forgotten[i]) << " ";
	o << "] fparts=[";
	for (uint32_t i = 0; i < m.n_forgotten_parts; i++)
		o << m.forgotten_parts[i] << " ";
	o << "] rack=" << DumpName(m.rack_id) << "}";
	return o.str();
}

std::string Dump(const km_produce_resp &m)
{
	std::ostringstream o;
	o << "produce_resp{topics=[";
	for (uint32_t i = 0; i < m.n_topics; i++)
		o << Topic(m.topics[i]) << " ";
	o << "] parts=[";
	for (uint32_t i = 0; i < m.n_parts; i++) {
		const km_produce_resp_part &p = m.parts[i];
		o << "(" << p.partition << " err=" << p.error_code
		  << " base=" << p.base_offset << " lat=" << p.log_append_time_ms
		  << " lso=" << p.log_start_offset << ")";
	}
	o << "] throttle=" << m.throttle_time_ms << "}";
	return o.str();
}

std::string Dump(const km_initpid_req &m)
{
	std::ostringstream o;
	o << "initpid_req{txn=" << DumpName(m.transactional_id)
	  << " timeout=" << m.transaction_timeout_ms << " pid=" << m.producer_id
	  << " epoch=" << m.producer_epoch << "}";
	return o.str();
}

std::string Dump(const km_initpid_resp &m)
{
	std::ostringstream o;
	o << "initpid_resp{throttle=" << m.throttle_time_ms
	  << " err=" << m.error_code << " pid=" << m.producer_id
	  << " epoch=" << m.producer_epoch << "}";
	return o.str();
}

std::string Dump(const km_dconfigs_req &m)
{
	std::ostringstream o;
	o << "dconfigs_req{";
	for (uint32_t i = 0; i < m.n_resources; i++) {
		const km_dconfigs_resource &r = m.resources[i];
		o << "(" << (int)r.type << " " << DumpName(r.name) << " keys=";
		if (r.n_keys < 0)
			o << "null";
		for (int32_t k = 0; k < r.n_keys; k++)
			o << (k ? "," : "[") << DumpName(m.keys[r.keys_first + k])
			  << (k + 1 == r.n_keys ? "]" : "");
		if (r.n_keys == 0)
			o << "[]";
		o << ")";
	}
	o << " syn=" << m.include_synonyms << " doc=" << m.include_documentation
	  << "}";
	return o.str();
}

std::string Dump(const km_dconfigs_resp &m)
{
	std::ostringstream o;
	o << "dconfigs_resp{throttle=" << m.throttle_time_ms;
	for (uint32_t i = 0; i < m.n_results; i++) {
		const km_dconfigs_dresult &r = m.results[i];
		o << " (err=" << r.error_code << " msg=" << DumpName(r.error_message)
		  << " " << (int)r.type << " " << DumpName(r.name) << " [";
		for (uint32_t k = 0; k < r.n_configs; k++) {
			const km_dconfigs_dentry &e = m.entries[r.first + k];
			o << "(" << DumpName(e.name) << "=" << DumpName(e.value)
			  << " ro=" << e.read_only << " src=" << (int)e.source
			  << " sens=" << e.sensitive << " type=" << (int)e.config_type
			  << " doc=" << DumpName(e.documentation) << " syn=";
			for (uint32_t s = 0; s < e.n_synonyms; s++) {
				const km_dconfigs_dsyn &y = m.synonyms[e.syn_first + s];
				o << DumpName(y.name) << "=" << DumpName(y.value) << "/"
				  << (int)y.source << ";";
			}
			o << ")";
		}
		o << "])";
	}
	o << "}";
	return o.str();
}

std::string Dump(const km_dcluster_req &m)
{
	std::ostringstream o;
	o << "dcluster_req{ops=" << m.include_cluster_authorized_operations
	  << " endpoint=" << (int)m.endpoint_type
	  << " fenced=" << m.include_fenced_brokers << "}";
	return o.str();
}

std::string Dump(const km_dcluster_resp &m)
{
	std::ostringstream o;
	o << "dcluster_resp{throttle=" << m.throttle_time_ms
	  << " err=" << m.error_code << " msg=" << DumpName(m.error_message)
	  << " endpoint=" << (int)m.endpoint_type
	  << " cluster=" << DumpName(m.cluster_id)
	  << " controller=" << m.controller_id << " brokers=[";
	for (uint32_t i = 0; i < m.n_brokers; i++) {
		const km_dcluster_broker &b = m.brokers[i];
		o << "(" << b.broker_id << " " << DumpName(b.host) << ":" << b.port
		  << " rack=" << DumpName(b.rack) << " fenced=" << b.is_fenced << ")";
	}
	o << "] ops=" << m.cluster_authorized_operations << "}";
	return o.str();
}

std::string Dump(const km_fetch_part &p, const km_chain *c)
{
	std::ostringstream o;
	o << "(" << p.partition << " err=" << p.error_code
	  << " hw=" << p.high_watermark << " lso=" << p.last_stable_offset
	  << " start=" << p.log_start_offset << " aborted=" << p.n_aborted
	  << "[";
	for (int32_t i = 0; i < p.n_aborted; i++)
		o << p.aborted[i].producer_id << "@" << p.aborted[i].first_offset
		  << " ";
	o << "] preferred=" << p.preferred_read_replica
	  << " records=" << DumpSpan(c, p.records) << ")";
	return o.str();
}

std::string DumpFetchResp(km_wire_rd *r, int16_t version)
{
	km_fetch_aborted aborted[kCap];
	km_fetch_resp_iter it;
	km_fetch_part p;
	std::ostringstream o;
	int rc = km_fetch_resp_begin(&it, r, version, aborted, kCap);

	if (rc < 0)
		return Err(rc);
	o << "fetch_resp{throttle=" << it.throttle_time_ms
	  << " err=" << it.error_code << " session=" << it.session_id << " [";
	while ((rc = km_fetch_resp_next_partition(&it, &p)) == 1)
		o << DumpName(it.cur.topic) << "#" << it.cur.topic_index
		  << Dump(p, r->chain);
	if (rc < 0)
		return Err(rc);
	o << "]}";
	return o.str();
}

std::string DumpProduceReq(km_wire_rd *r, int16_t version)
{
	km_produce_req_iter it;
	km_produce_part p;
	std::ostringstream o;
	int rc = km_produce_req_begin(&it, r, version);

	if (rc < 0)
		return Err(rc);
	o << "produce_req{txn=" << DumpName(it.transactional_id)
	  << " acks=" << it.acks << " timeout=" << it.timeout_ms << " [";
	while ((rc = km_produce_req_next_partition(&it, &p)) == 1)
		o << DumpName(it.cur.topic) << "#" << it.cur.topic_index << "("
		  << p.partition << " " << DumpSpan(r->chain, p.records) << ")";
	if (rc < 0)
		return Err(rc);
	o << "]}";
	return o.str();
}

// Owned decode targets with kCap room everywhere.
struct Store {
	km_wire_name names[kCap];
	km_proto_topic topics[kCap], forgotten[kCap];
	km_api_range keys[kCap];
	km_metadata_broker brokers[kCap];
	km_metadata_topic mtopics[kCap];
	km_metadata_part mparts[kCap];
	int32_t nodes[kCap], fparts[kCap];
	km_listoffsets_req_part loreq[kCap];
	km_listoffsets_resp_part loresp[kCap];
	km_fetch_req_part freq[kCap];
	km_produce_resp_part presp[kCap];
};

template <typename M> static std::string Done(int rc, const M &m)
{
	return rc < 0 ? Err(rc) : Dump(m);
}

std::string DecodeRequestBody(km_wire_rd *r, int16_t key, int16_t version)
{
	std::unique_ptr<Store> s(new Store());

	switch (key) {
	case KM_API_API_VERSIONS: {
		km_apiversions_req m;
		return Done(km_apiversions_req_decode(r, version, &m), m);
	}
	case KM_API_METADATA: {
		km_metadata_req m = {s->names, kCap, 0, false, nullptr};
		return Done(km_metadata_req_decode(r, version, &m), m);
	}
	case KM_API_LIST_OFFSETS: {
		km_listoffsets_req m = {0, 0, s->topics, kCap, 0,
					s->loreq, kCap, 0};
		return Done(km_listoffsets_req_decode(r, version, &m), m);
	}
	case KM_API_FETCH: {
		km_fetch_req m;
		memset(&m, 0, sizeof(m));
		m.topics = s->topics, m.topics_max = kCap;
		m.parts = s->freq, m.parts_max = kCap;
		m.forgotten = s->forgotten, m.forgotten_max = kCap;
		m.forgotten_parts = s->fparts, m.forgotten_parts_max = kCap;
		return Done(km_fetch_req_decode(r, version, &m), m);
	}
	case KM_API_PRODUCE:
		return DumpProduceReq(r, version);
	case KM_API_INIT_PRODUCER_ID: {
		km_initpid_req m;
		return Done(km_initpid_req_decode(r, version, &m), m);
	}
	case KM_API_DESCRIBE_CONFIGS: {
		std::vector<km_dconfigs_resource> res(kCap);
		km_dconfigs_req m = {res.data(), kCap, 0, s->names, kCap, 0,
				     false, false};
		return Done(km_dconfigs_req_decode(r, version, &m), m);
	}
	case KM_API_DESCRIBE_CLUSTER: {
		km_dcluster_req m;
		return Done(km_dcluster_req_decode(r, version, &m), m);
	}
	}
	return Err(KM_EWIREAPIKEY);
}

std::string DecodeResponseBody(km_wire_rd *r, int16_t key, int16_t version)
{
	std::unique_ptr<Store> s(new Store());

	switch (key) {
	case KM_API_API_VERSIONS: {
		km_apiversions_resp m = {0, s->keys, kCap, 0, 0};
		return Done(km_apiversions_resp_decode(r, version, &m), m);
	}
	case KM_API_METADATA: {
		km_metadata_resp m;
		memset(&m, 0, sizeof(m));
		m.brokers = s->brokers, m.brokers_max = kCap;
		m.topics = s->mtopics, m.topics_max = kCap;
		m.parts = s->mparts, m.parts_max = kCap;
		m.nodes = s->nodes, m.nodes_max = kCap;
		return Done(km_metadata_resp_decode(r, version, &m), m);
	}
	case KM_API_LIST_OFFSETS: {
		km_listoffsets_resp m = {0, s->topics, kCap, 0,
					 s->loresp, kCap, 0};
		return Done(km_listoffsets_resp_decode(r, version, &m), m);
	}
	case KM_API_FETCH:
		return DumpFetchResp(r, version);
	case KM_API_PRODUCE: {
		km_produce_resp m = {s->topics, kCap, 0, s->presp, kCap, 0, 0};
		return Done(km_produce_resp_decode(r, version, &m), m);
	}
	case KM_API_INIT_PRODUCER_ID: {
		km_initpid_resp m;
		return Done(km_initpid_resp_decode(r, version, &m), m);
	}
	case KM_API_DESCRIBE_CONFIGS: {
		std::vector<km_dconfigs_dresult> res(kCap);
		std::vector<km_dconfigs_dentry> ent(kCap);
		std::vector<km_dconfigs_dsyn> syn(kCap);
		km_dconfigs_resp m = {0, res.data(), kCap, 0, ent.data(), kCap, 0,
				      syn.data(), kCap, 0};
		return Done(km_dconfigs_resp_decode(r, version, &m), m);
	}
	case KM_API_DESCRIBE_CLUSTER: {
		std::vector<km_dcluster_broker> b(kCap);
		km_dcluster_resp m;
		memset(&m, 0, sizeof(m));
		m.brokers = b.data(), m.brokers_max = kCap;
		return Done(km_dcluster_resp_decode(r, version, &m), m);
	}
	}
	return Err(KM_EWIREAPIKEY);
}

std::string ServerDecode(const km_chain *c, const km_wire_limits *lim)
{
	km_chain_cur start = km_chain_start(c), body = start;
	uint32_t size = 0;
	int rc = km_wire_frame_parse(c, start, lim->frame_bytes_max, &size);
	km_wire_rd r;
	km_reqhdr h;

	if (rc == 0)
		return "NEED";
	if (rc < 0)
		return Err(rc);
	km_chain_advance(c, &body, KM_WIRE_SIZE_BYTES);
	km_wire_rd_init(&r, c, body, size, lim);
	rc = km_reqhdr_decode(&r, &h);
	if (rc < 0)
		return Dump(h) + " " + Err(rc);
	return Dump(h) + " " + DecodeRequestBody(&r, h.api_key, h.api_version);
}

std::string ClientDecode(const km_chain *c, int16_t key, int16_t version,
			 const km_wire_limits *lim)
{
	km_chain_cur start = km_chain_start(c), body = start;
	uint32_t size = 0;
	int rc = km_wire_frame_parse(c, start, lim->frame_bytes_max, &size);
	int32_t corr = 0;
	km_wire_rd r;

	if (rc == 0)
		return "NEED";
	if (rc < 0)
		return Err(rc);
	km_chain_advance(c, &body, KM_WIRE_SIZE_BYTES);
	km_wire_rd_init(&r, c, body, size, lim);
	rc = km_resphdr_decode(&r, key, version, &corr);
	if (rc < 0)
		return Err(rc);
	return "corr=" + std::to_string(corr) + " " +
	       DecodeResponseBody(&r, key, version);
}

int DecodeCut(const Bytes &frame, uint32_t len, bool request, int16_t key,
	      int16_t version)
{
	Chain ch(Bytes(frame.begin() + KM_WIRE_SIZE_BYTES,
		       frame.begin() + KM_WIRE_SIZE_BYTES + len),
		 {});
	km_wire_rd r;
	km_reqhdr h;
	int32_t corr;

	km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()), len,
			&km_wire_limits_default);
	if (request) {
		int rc = km_reqhdr_decode(&r, &h);
		if (rc < 0)
			return rc;
	}
	if (!request && km_resphdr_decode(&r, key, version, &corr) < 0)
		return r.err;
	std::string d = request ? DecodeRequestBody(&r, h.api_key, h.api_version)
				: DecodeResponseBody(&r, key, version);
	(void)d;
	return r.err;
}

} // namespace wt
