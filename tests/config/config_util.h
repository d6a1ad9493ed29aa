// Shared by the config tests: a temp dir, writing a file, and a load that
// keeps the return code and the message together.
#ifndef KM_TESTS_CONFIG_UTIL_H
#define KM_TESTS_CONFIG_UTIL_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.h"
#include "control/config.h"

namespace cfgtest {

struct TempDir {
	std::string path;
	TempDir()
	{
		char tmpl[] = "/tmp/kmirror-cfg-XXXXXX";
		path = mkdtemp(tmpl);
	}
	~TempDir() { std::filesystem::remove_all(path); }
	std::string file(const std::string &name, const std::string &text) const
	{
		std::string p = path + "/" + name;
		std::ofstream(p, std::ios::binary) << text;
		return p;
	}
};

inline std::string slurp(const std::string &p)
{
	std::ifstream in(p, std::ios::binary);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

// struct km_config is ~45 KiB: keep it off the test's stack.
struct Loaded {
	int rc = 0;
	std::string err;
	std::unique_ptr<km_config> cfg{new km_config()};
	const km_config *operator->() const { return cfg.get(); }
};

inline Loaded load(const char *path, const std::vector<std::string> &sets = {})
{
	Loaded l;
	std::vector<const char *> v;
	for (const std::string &s : sets)
		v.push_back(s.c_str());
	char err[KM_CONFIG_ERR_BYTES_MAX];
	l.rc = km_config_load(l.cfg.get(), path, v.data(), (uint32_t)v.size(),
			      err, sizeof(err));
	l.err = err;
	return l;
}

} // namespace cfgtest

#endif
