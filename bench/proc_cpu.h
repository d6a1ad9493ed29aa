/* CPU seconds a process has spent, from /proc/PID/stat: what the C++
 * benches divide by the bytes moved (rule 5: CPU per GB). */
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

/* utime + stime, and with children also cutime + cstime (children reaped:
 * a JVM's helpers, a shell's commands). 0 once the process is gone. */
inline double proc_cpu_s(pid_t pid, bool with_children = false)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
	std::string s((std::istreambuf_iterator<char>(in)), {});
	size_t p = s.rfind(')'); /* the name may hold spaces and ')' */
	std::istringstream f(p == std::string::npos ? "" : s.substr(p + 2));
	std::string skip;
	long long t[4] = {};

	for (int i = 3; i < 14; i++)
		f >> skip;
	f >> t[0] >> t[1] >> t[2] >> t[3];
	long long sum = t[0] + t[1] + (with_children ? t[2] + t[3] : 0);
	return (double)sum / (double)sysconf(_SC_CLK_TCK);
}
