/* Certificates for TLS tests; see certs.h.
 * Goal: one way to make a CA and its certificates for every TLS suite.
 * Method: the openssl tool through run_command (bounded wait), two days of
 * validity, RSA 2048, keys unencrypted and private to the owner. */
#include "certs.h"

#include <sys/stat.h>

#include <fstream>

#include "process.h"

namespace kmtest {

namespace {

bool put(const std::string &path, const std::string &text, mode_t mode)
{
	std::ofstream f(path, std::ios::binary | std::ios::trunc);
	f << text;
	f.close();
	return f.good() && chmod(path.c_str(), mode) == 0;
}

} // namespace

std::string openssl(const std::vector<std::string> &args)
{
	std::vector<std::string> argv = { "openssl" };
	argv.insert(argv.end(), args.begin(), args.end());
	ChildResult r = run_command(argv, 60000);
	return r.exit_code == 0 ? "" : "openssl " + args[0] + ": " + r.describe();
}

std::string make_ca(const std::string &dir, const std::string &name)
{
	std::string p = dir + "/" + name, why;

	why = openssl({ "req", "-x509", "-newkey", "rsa:2048", "-nodes",
			"-keyout", p + ".key", "-out", p + ".pem", "-subj",
			"/CN=" + name, "-days", "2" });
	if (why.empty() && chmod((p + ".key").c_str(), 0600) != 0)
		why = "chmod " + p + ".key";
	return why;
}

std::string make_cert(const std::string &dir, const std::string &ca,
		      const std::string &name, const std::string &subj,
		      const std::string &san)
{
	std::string why, p = dir + "/" + name;
	std::vector<std::string> x = { "x509", "-req", "-in", p + ".csr", "-CA",
				       dir + "/" + ca + ".pem", "-CAkey",
				       dir + "/" + ca + ".key", "-CAcreateserial",
				       "-out", p + ".pem", "-days", "2" };

	if (!san.empty()) {
		if (!put(p + ".ext", "subjectAltName=" + san + "\n", 0644))
			return "cannot write " + p + ".ext";
		x.insert(x.end(), { "-extfile", p + ".ext" });
	}
	if (!(why = openssl({ "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
			      p + ".key", "-out", p + ".csr", "-subj", subj }))
		     .empty() ||
	    !(why = openssl(x)).empty())
		return why;
	if (chmod((p + ".key").c_str(), 0600) != 0)
		return "chmod " + p + ".key";
	return put(p + ".ks.pem", read_file(p + ".key") + read_file(p + ".pem"),
		   0600) ? "" : "cannot write " + p + ".ks.pem";
}

} // namespace kmtest
