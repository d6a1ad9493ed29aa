/* Authorization in the front end (acl.h): the connection's principal
 * (fc->principal, User:ANONYMOUS until TLS or SASL names it) and its
 * client address, as Kafka's RequestContext gives them to the
 * authorizer. */
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"

/* Kafka compares the ACL's host with InetAddress.getHostAddress(): the
 * address without the '/' of ClientHost. */
static const char *host_of(const struct fe_conn *fc)
{
	return fc->client_host[0] == '/' ? fc->client_host + 1 : fc->client_host;
}

bool km_frontend_acl_check(struct fe_conn *fc, enum km_acl_op op,
			   enum km_acl_rtype rtype, const char *name)
{
	bool ok = km_acl_store_authorize(fc->fe->acls, fc->principal,
					 host_of(fc), op, rtype, name);

	/* Kafka's authorizer logs a denial at INFO (kafka.authorizer.logger). */
	if (!ok)
		KM_INFO("frontend", "connection %u (client id \"%s\"): "
			"principal %s from %s denied %s on %s %s",
			fc->id, fc->client_id, fc->principal, host_of(fc),
			km_acl_op_name(op), km_acl_rtype_name(rtype), name);
	return ok;
}

bool km_frontend_acl_check_any(struct fe_conn *fc, enum km_acl_op op,
			       enum km_acl_rtype rtype)
{
	struct km_acl_store *s = fc->fe->acls;
	bool ok;

	if (s == NULL)
		return true;
	ok = km_acl_store_authorize_any(s, fc->principal, host_of(fc), op,
					rtype);
	if (!ok) {
		KM_INFO("frontend", "connection %u (client id \"%s\"): "
			"principal %s from %s has %s on no %s",
			fc->id, fc->client_id, fc->principal, host_of(fc),
			km_acl_op_name(op), km_acl_rtype_name(rtype));
	}
	return ok;
}

bool km_frontend_acl_sees(struct fe_conn *fc, enum km_acl_op op,
			  enum km_acl_rtype rtype, const char *name)
{
	return fc->fe->acls == NULL ||
	       km_acl_authorize(km_acl_store_get(fc->fe->acls), fc->principal,
				host_of(fc), op, rtype, name);
}
