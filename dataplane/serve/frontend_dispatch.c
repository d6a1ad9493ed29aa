/* The front-end's request dispatch: a frame's header decoded and counted,
 * and its body handed to the API's handler. Which APIs and versions are
 * served, and their names, is kafka/proto_header.c's table. */
#include <string.h>

#include "common/errors.h"
#include "dataplane/serve/frontend_pvt.h"

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

static int dispatch(struct fe_conn *fc, const struct km_reqhdr *h,
		    struct km_wire_rd *r)
{
	switch (h->api_key) {
	case KM_API_API_VERSIONS:
		return fe_handle_apiversions(fc, h, r, false);
	case KM_API_METADATA:
		return fe_handle_metadata(fc, h, r);
	case KM_API_LIST_OFFSETS:
		return fe_handle_listoffsets(fc, h, r);
	case KM_API_FETCH:
		return fe_handle_fetch(fc, h, r);
	case KM_API_PRODUCE:
		return fe_handle_produce(fc, h, r);
	case KM_API_INIT_PRODUCER_ID:
		return fe_handle_initpid(fc, h, r);
	case KM_API_KMIRROR_BARRIER:
		return fe_handle_barrier(fc, h, r);
	case KM_API_OFFSET_COMMIT:
	case KM_API_OFFSET_FETCH:
	case KM_API_FIND_COORDINATOR:
	case KM_API_JOIN_GROUP:
	case KM_API_HEARTBEAT:
	case KM_API_LEAVE_GROUP:
	case KM_API_SYNC_GROUP:
	case KM_API_DESCRIBE_GROUPS:
	case KM_API_LIST_GROUPS:
		return fe_handle_group(fc, h, r);
	default:
		return fe_conn_fail(fc, "API key %d v%d is not served",
				    h->api_key, h->api_version);
	}
}

int fe_dispatch(struct fe_conn *fc, const struct km_kframe_frame *fr,
		bool first)
{
	struct km_wire_rd r;
	struct km_reqhdr h;
	int rc;

	km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len,
			&fc->fe->limits);
	rc = km_reqhdr_decode(&r, &h);
	if (rc == KM_EWIREAPIKEY || rc == KM_EWIREVERSION || rc == 0)
		note_client(fc, &h);
	if (first) /* a retry after FE_WAIT was counted the first time */
		count_request(fc->fe, &h, rc);
	if (rc == KM_EWIREAPIKEY)
		return fe_conn_fail(fc, "unsupported API key %d (v%d)",
				    h.api_key, h.api_version);
	if (rc == KM_EWIREVERSION && h.api_key == KM_API_API_VERSIONS)
		return fe_handle_apiversions(fc, &h, &r, true);
	if (rc == KM_EWIREVERSION)
		return fe_conn_fail(fc, "unsupported %s version %d (key %d)",
				    fe_api_name(h.api_key), h.api_version,
				    h.api_key);
	if (rc < 0)
		return fe_conn_fail(fc, "malformed request header: %s",
				    km_strerror(rc));
	return dispatch(fc, &h, &r);
}
