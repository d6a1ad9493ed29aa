// The front-end suite's server: one thread running a dataplane worker loop
// (km_uring_poll, km_net_poll, km_local_write_poll, km_log_tick,
// km_frontend_tick) over a real io_uring, the kernel network backend and
// real km_logs in a temporary directory, with a km_part_ops whose produce
// goes straight to each WRITABLE partition's km_local_write (the loop's
// thread owns every log) and whose alloc_pid is a counter.
//
// The loop blocks in io_uring for at most a few milliseconds or until the
// front-end's next deadline; work for the loop's thread (appending batches
// a test builds, reading stats) is handed over with Run(), which waits for
// it to finish.
#ifndef KM_TESTS_FRONTEND_FE_HARNESS_H
#define KM_TESTS_FRONTEND_FE_HARNESS_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/serve/frontend.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/net/net.h"
#include "iouring_log/log.h"

struct fe_parts; // fe_support.h

namespace fetest {

using Bytes = std::vector<uint8_t>;

struct PartSpec {
	std::string topic;
	int32_t partition;
	bool writable;
	bool internal = false; /* km_part.internal: Produce refused */
};

class Server {
public:
	Server() = default;
	~Server();
	Server(const Server &) = delete;
	Server &operator=(const Server &) = delete;

	// Before Start(): the logs' timer and byte count never flush, so
	// only a km_log_flush (an acks=-1 write asks for one) makes data
	// durable, and the appended offset can be held ahead of it.
	void HoldDurability() { hold_durability_ = true; }
	// Before Start(): authorize with these ACLs (dataplane/serve/acl.h;
	// the store stays the caller's and must outlive the server).
	void SetAcls(struct km_acl_store *s) { acls_ = s; }
	// Before Start(): the listener is SASL_PLAINTEXT with these users
	// (a sasl.users.file) and settings (issue 16).
	void Sasl(const std::string &users_file, uint32_t mechanisms,
		  int64_t reauth_ms)
	{
		sasl_users_ = users_file;
		sasl_mechs_ = mechanisms;
		sasl_reauth_ms_ = reauth_ms;
	}
	// Parts in (topic, partition) order. "" on success, else why not.
	std::string Start(const std::vector<PartSpec> &parts);
	// Stop the loop (front-end stopped, connections closed, writers
	// drained), then tear everything down. Idempotent.
	void Stop();

	uint16_t port() const { return port_; }
	std::string bootstrap() const
	{
		return "127.0.0.1:" + std::to_string(port_);
	}
	km_log *log(size_t i) const { return logs_[i]; }
	size_t index(const std::string &topic, int32_t partition) const;

	// Run fn on the loop's thread and wait for it.
	void Run(const std::function<void()> &fn);
	km_frontend_stats Stats();
	km_net_stats NetStats();
	int64_t EndOffset(size_t i); // km_log_end_offset, on the owner
	uint64_t ProduceCalls(size_t i);
	// km_frontend_group_sync on the loop's thread, waiting (up to
	// timeout_ms) for its done callback: that callback's code, or the
	// call's own, or -ETIMEDOUT.
	int GroupSync(km_group_sync *s, int timeout_ms);
	// Take partition i offline (a log error published) or back (0).
	void SetError(size_t i, int err);
	// The next n markers for partition i fail; the marker calls it had.
	void FailMarkers(size_t i, uint32_t n);
	uint64_t MarkerCalls(size_t i);
	// What went wrong inside the loop ("" if nothing).
	std::string LoopError();

private:
	std::string Open(const std::vector<PartSpec> &parts);
	void Loop();
	void Turn();
	void Idle();
	void Drain();
	void RunTasks();
	void Fail(const std::string &what);

	std::string dir_;
	std::string sasl_users_;
	uint32_t sasl_mechs_ = 0;
	int64_t sasl_reauth_ms_ = 0;
	km_uring ring_ = {};
	bool ring_up_ = false;
	km_net *net_ = nullptr;
	::fe_parts *parts_ = nullptr;
	std::vector<PartSpec> specs_;
	std::vector<km_log *> logs_;
	std::vector<km_local_write *> lws_;
	km_frontend *fe_ = nullptr;
	uint16_t port_ = 0;
	std::thread th_;
	std::atomic<bool> stop_{false};
	std::mutex mu_;
	std::condition_variable cv_;
	std::deque<std::function<void()> *> tasks_;
	std::atomic<bool> has_tasks_{false};
	std::string loop_err_;
	bool hold_durability_ = false;
	struct km_acl_store *acls_ = nullptr;
};

// Milliseconds on CLOCK_MONOTONIC, the front-end's clock.
uint64_t MonoMs();

// ---- real clients (librdkafka 2.0.2) ----

using Props = std::vector<std::pair<std::string, std::string>>;

// One message as produced (with its delivery report) or consumed.
struct Msg {
	int32_t partition = 0;
	int64_t offset = -1;
	bool key_null = true;
	std::string key;
	bool value_null = true;
	std::string value;
	struct Header {
		std::string name;
		bool null;
		std::string value;
	};
	std::vector<Header> headers;
	int64_t timestamp = 0;	/* 0: let the producer stamp it */
	int err = 0;		/* delivery report (rd_kafka_resp_err_t) */
	bool delivered = false;
};

// A producer; Send() produces every message to topic/partition given in
// each Msg, flushes, and fills in the delivery reports.
class Producer {
public:
	~Producer();
	std::string Create(const std::string &bootstrap, const Props &extra);
	std::string Send(const std::string &topic, std::vector<Msg> *msgs,
			 int timeout_ms);
	void *rk = nullptr; /* rd_kafka_t */
};

// A consumer on the legacy queue API (consume_start_queue): no group, so
// nothing but the APIs the front-end serves. enable.partition.eof is on:
// eof[p] is the offset of the last end-of-partition event.
class Consumer {
public:
	~Consumer();
	std::string Start(const std::string &bootstrap, const std::string &topic,
			  const std::vector<int32_t> &partitions, int64_t offset,
			  const Props &extra);
	// Poll until done() or timeout_ms; false on timeout.
	bool PollUntil(const std::function<bool()> &done, int timeout_ms);
	void Stop();
	std::vector<Msg> msgs;
	std::vector<std::pair<int32_t, int64_t>> eofs; /* every EOF event */
	std::vector<std::string> errors;
	int64_t Eof(int32_t partition) const;
	void *rk = nullptr;
	void *rkt = nullptr;
	void *queue = nullptr;
	std::vector<int32_t> parts;
};

// Payload of n pseudo-random bytes (compresses poorly on purpose).
std::string RandomBytes(size_t n, uint64_t seed);

// Run a shell command with a time limit; its stdout, and the exit status.
std::string Shell(const std::string &cmd, int *status);

} // namespace fetest

#endif
