/* The front-end's request dispatch: a frame's header decoded and counted,
 * and its body handed to the API's handler. Which APIs and versions are
 * served, and their names, is kafka/proto_header.c's table; this file only
 * adds the handler of each (docs/adding-an-api.md). */
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "dataplane/serve/frontend_pvt.h"
#include "kafka/sasl.h"

typedef int (*fe_handler_fn)(struct fe_conn *fc, const struct km_reqhdr *h,
			     struct km_wire_rd *r);

struct handler_row {
	int16_t api_key;
	fe_handler_fn fn;
};

static int handle_apiversions(struct fe_conn *fc, const struct km_reqhdr *h,
			      struct km_wire_rd *r)
{
	return km_frontend_handle_apiversions(fc, h, r, false);
}

/* One row per API the table speaks; the group coordinator's APIs share
 * frontend_group.c's entry, which tells them apart. */
static const struct handler_row handlers[] = {
	{ KM_API_PRODUCE, km_frontend_handle_produce },
	{ KM_API_FETCH, km_frontend_handle_fetch },
	{ KM_API_LIST_OFFSETS, km_frontend_handle_listoffsets },
	{ KM_API_METADATA, km_frontend_handle_metadata },
	{ KM_API_OFFSET_COMMIT, km_frontend_handle_group },
	{ KM_API_OFFSET_FETCH, km_frontend_handle_group },
	{ KM_API_FIND_COORDINATOR, km_frontend_handle_group },
	{ KM_API_JOIN_GROUP, km_frontend_handle_group },
	{ KM_API_HEARTBEAT, km_frontend_handle_group },
	{ KM_API_LEAVE_GROUP, km_frontend_handle_group },
	{ KM_API_SYNC_GROUP, km_frontend_handle_group },
	{ KM_API_DESCRIBE_GROUPS, km_frontend_handle_group },
	{ KM_API_LIST_GROUPS, km_frontend_handle_group },
	{ KM_API_API_VERSIONS, handle_apiversions },
	{ KM_API_CREATE_TOPICS, km_frontend_handle_admin },
	{ KM_API_DELETE_TOPICS, km_frontend_handle_admin },
	{ KM_API_DELETE_RECORDS, km_frontend_handle_admin },
	{ KM_API_INIT_PRODUCER_ID, km_frontend_handle_initpid },
	{ KM_API_ADD_PARTITIONS_TO_TXN, km_frontend_handle_addparts },
	{ KM_API_END_TXN, km_frontend_handle_endtxn },
	{ KM_API_ADD_OFFSETS_TO_TXN, km_frontend_handle_addoffsets },
	{ KM_API_TXN_OFFSET_COMMIT, km_frontend_handle_txn_offset_commit },
	{ KM_API_DESCRIBE_CONFIGS, km_frontend_handle_describe_configs },
	{ KM_API_CREATE_PARTITIONS, km_frontend_handle_admin },
	{ KM_API_DELETE_GROUPS, km_frontend_handle_delete_groups },
	{ KM_API_OFFSET_DELETE, km_frontend_handle_offset_delete },
	{ KM_API_DESCRIBE_CLUSTER, km_frontend_handle_describe_cluster },
	{ KM_API_KMIRROR_BARRIER, km_frontend_handle_barrier },
	{ KM_API_SASL_HANDSHAKE, km_frontend_handle_sasl },
	{ KM_API_SASL_AUTHENTICATE, km_frontend_handle_sasl },
};

#define N_HANDLERS (sizeof(handlers) / sizeof(handlers[0]))

static fe_handler_fn find_handler(int16_t api_key)
{
	for (uint32_t i = 0; i < N_HANDLERS; i++)
		if (handlers[i].api_key == api_key)
			return handlers[i].fn;
	return NULL;
}

/* An API advertised in ApiVersions without a handler would close every
 * client that uses it: a programmer error, caught when a front end is
 * created rather than by the first client. */
void km_frontend_dispatch_check(void)
{
	struct km_api_range keys[KM_PROTO_APIS];
	int n = km_proto_supported(keys, KM_PROTO_APIS);

	KM_ASSERT(n == (int)N_HANDLERS);
	for (int i = 0; i < n; i++)
		KM_ASSERT(find_handler(keys[i].api_key) != NULL);
}

static void note_client(struct fe_conn *fc, const struct km_reqhdr *h)
{
	size_t n;

	if (fc->client_id[0] != '\0' || h->client_id.len <= 0)
		return;
	/* Only logged: cut to what the connection keeps. */
	n = (size_t)h->client_id.len < sizeof(fc->client_id) - 1
		    ? (size_t)h->client_id.len : sizeof(fc->client_id) - 1;
	memcpy(fc->client_id, h->client_id.s, n);
	fc->client_id[n] = '\0';
}

static void count_request(struct km_frontend *fe, const struct km_reqhdr *h,
			  int rc)
{
	if (rc != KM_EWIREAPIKEY && h->api_key >= 0 &&
	    h->api_key < KM_FRONTEND_API_KEYS)
		fe->st.requests[h->api_key]++;
	else if (rc == KM_EWIREAPIKEY)
		fe->st.requests_other++;
}

int km_frontend_dispatch(struct fe_conn *fc, const struct km_kframe_frame *fr,
		bool first)
{
	struct km_wire_rd r;
	struct km_reqhdr h;
	fe_handler_fn fn;
	int rc, gate;

	km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len,
			&fc->fe->limits);
	rc = km_reqhdr_decode(&r, &h);
	if (rc == KM_EWIREAPIKEY || rc == KM_EWIREVERSION || rc == 0)
		note_client(fc, &h);
	if (first) /* a retry after FE_WAIT was counted the first time */
		count_request(fc->fe, &h, rc);
	/* SASL first: before authentication most requests close the
	 * connection, whatever their version. */
	if (fc->auth != FE_AUTH_NONE && (rc == 0 || rc == KM_EWIREVERSION) &&
	    (gate = km_frontend_sasl_gate(fc, &h)) < 0)
		return gate;
	if (rc == KM_EWIREAPIKEY)
		return km_frontend_conn_fail(fc, "unsupported API key %d (v%d)",
				    h.api_key, h.api_version);
	if (rc == KM_EWIREVERSION && h.api_key == KM_API_API_VERSIONS)
		return km_frontend_handle_apiversions(fc, &h, &r, true);
	if (rc == KM_EWIREVERSION)
		return km_frontend_conn_fail(fc, "unsupported %s version %d (key %d)",
				    km_proto_api_name(h.api_key), h.api_version,
				    h.api_key);
	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed request header: %s",
				    km_strerror(rc));
	if ((fn = find_handler(h.api_key)) == NULL)
		return km_frontend_conn_fail(fc, "API key %d v%d is not served",
				    h.api_key, h.api_version);
	return fn(fc, &h, &r);
}
