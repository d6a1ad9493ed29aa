/* Template bodies of daemon.h. */
#ifndef KM_TESTS_E2E_DAEMON_IMPL_H
#define KM_TESTS_E2E_DAEMON_IMPL_H

#include <time.h>

namespace kmtest {

template <class F> bool poll_until(F pred, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		if (pred())
			return true;
		if (now_ms() >= deadline)
			return false;
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, nullptr);
	}
}

template <class F> std::string Daemon::wait_status(F pred, int timeout_ms)
{
	std::map<std::string, PartStatus> st;
	std::string last;
	bool ok = poll_until(
		[&] {
			st.clear();
			last = status(&st);
			return last.empty() && pred(st);
		},
		timeout_ms);

	if (ok)
		return "";
	std::string why = "status condition not met in " +
			  std::to_string(timeout_ms) + " ms" +
			  (last.empty() ? "" : ": " + last) + "; status:";
	for (auto &[k, v] : st)
		why += " " + k + "{" + v.state + " leo=" + std::to_string(v.leo) +
		       " src=" + std::to_string(v.source_hw) +
		       (v.reason.empty() ? "" : " " + v.reason) + "}";
	return why + "\nstderr: " + child_.stderr_so_far();
}

} // namespace kmtest

#endif
