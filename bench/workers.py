#!/usr/bin/env python3
"""bench workers (issue 18.3): kmirrord with workers=1 against workers=2,
side by side in one run, on a CPU-bound path: the source's logs and the
mirror's data.dir are on tmpfs (/dev/shm), so no disk bounds either side.

The source's logs are written by a kmirrord serving writable partitions
this script preloads (one topic per case: 2 or 4 partitions, 64 KiB or
1 KiB records, WORKERS_MIB of log in all, spread evenly). They are then
served by bench-fast-source (fast_source.cc), a broker with a thread per
connection: kmirrord serves every client from one worker thread, which
feeds about what one mirror worker takes, so a kmirrord source cannot show
two workers scaling (WORKERS_SOURCE=kmirrord keeps it, for comparison). For each case and repetition the mirror runs
once with each worker count, timed from its first mirrored record until
every partition's high watermark is the source's end (start-up apart).

Printed per run: GB/s of log, the mirror's CPU s/GB (utime + stime of the
whole process, /proc/PID/stat), how many partitions each worker owns
(status), and for each of its threads (named km-worker-N; io_uring's
iou-wrk-TID helpers, which run a worker's writes to tmpfs, as
km-worker-N+io by that TID; the control thread as other) the CPU seconds,
the seconds it was runnable but waited for a core (run delay,
/proc/PID/task/TID/schedstat: the other work on a shared machine) and, for
a worker, the seconds it slept (waiting for the source's bytes). The
source's CPU seconds too, and its busiest thread's: it shares the cores.
Then three bounds on each run's GB/s, from its CPU per byte: a core per
worker thread (the busiest one's CPU), the source's busiest thread (its
front end serves every connection from one worker) and this machine's
cores (the mirror's threads and the source's together).

Three ratios per case, workers=2 over workers=1, medians of the
repetitions:
  wall:     GB/s against GB/s, what the issue's target (>= 1.7x) names;
  capacity: the first bound against the first bound: whether kmirrord
            itself scales (its busiest worker thread's CPU per byte),
            whatever else runs on the machine;
  model:    each run's lowest bound against the other's: the wall ratio
            this machine would show were nothing else running on it.
The target is judged on the wall ratio; when it is missed the reasons are
printed from the figures (the machine's bound, time waited for a core, a
worker sleeping for want of data, the source's thread, kmirrord's own
capacity).

usage: bench/workers.py BUILD_DIR
env:   WORKERS_MIB (log per case, default 512), WORKERS_REPS (default 3),
       WORKERS_CASES (default "64k:2 64k:4 1k:2 1k:4"), WORKERS_SOURCE
       (fast, the default, or kmirrord), WORKERS_NICE, WORKERS_PERF (a
       directory: perf record -g of each timed span there)
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HZ = os.sysconf("SC_CLK_TCK")
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
KD = os.path.join(BUILD, "control", "kmirrord")
PRODUCE = os.path.join(BUILD, "tools", "kmirror-produce")
FAST = os.path.join(BUILD, "bench", "bench-fast-source")
SOURCE = os.environ.get("WORKERS_SOURCE", "fast")
SOURCE_WHAT = {
    "fast": "bench-fast-source over the preloaded logs, a thread per "
            "connection (each mirror worker fed by its own thread)",
    "kmirrord": "the preloading kmirrord itself (it serves every client "
                "from one worker thread)",
}
MIB = int(os.environ.get("WORKERS_MIB", "512"))
REPS = int(os.environ.get("WORKERS_REPS", "3"))
CASES = os.environ.get("WORKERS_CASES", "64k:2 64k:4 1k:2 1k:4").split()
TARGET = 1.7
PROCS = []
# meson test sets MALLOC_PERTURB_ (glibc then writes every block it hands
# out): what is measured is kmirrord as it runs, without it.
os.environ.pop("MALLOC_PERTURB_", None)


def die(msg):
    print("bench workers: " + msg, file=sys.stderr)
    sys.exit(1)


class Ctl:
    """One connection to a kmirrord's control socket, kept open: a poll
    costs a round trip, not a process start."""

    def __init__(self, path, proc, deadline_s=30):
        end = time.monotonic() + deadline_s
        while True:
            if proc.poll() is not None:
                die(f"kmirrord exited ({proc.returncode}) before {path}")
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if time.monotonic() > end:
                    die(f"no control socket at {path}")
                time.sleep(0.01)
        self.f = self.s.makefile("rb")

    def status(self):
        self.s.sendall(b'{"cmd":"status"}\n')
        line = self.f.readline()
        if not line:
            die("control socket closed")
        return json.loads(line)

    def close(self):
        self.f.close()
        self.s.close()


def parts_of(st, topic):
    return [p for p in st["partitions"]
            if p["partition"].rsplit(":", 1)[0] == topic]


def nice_fn():
    nice = int(os.environ.get("WORKERS_NICE", "0"))
    return (lambda: os.nice(nice)) if nice else None


def start_kmirrord(data, sock, *sets):
    """WORKERS_NICE (e.g. -10, as root) runs both kmirrords ahead of the
    rest of a shared machine, so that the wall ratio is theirs."""
    args = [KD, "--set", f"data.dir={data}", "--set", "listeners=127.0.0.1:0",
            "--set", f"control.socket={sock}", "--set", "log.level=warn"]
    for s in sets:
        args += ["--set", s]
    log = open(data + ".log", "ab")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                         preexec_fn=nice_fn())
    PROCS.append(p)
    return p


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def proc_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])  # utime + stime (fields 14, 15)


def threads(pid):
    """{tid: (name, cpu_s, run_delay_s)} of every thread of pid."""
    out = {}
    d = f"/proc/{pid}/task"
    for tid in os.listdir(d):
        try:
            with open(f"{d}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{d}/{tid}/schedstat") as f:
                run_ns, delay_ns, _ = (int(x) for x in f.read().split())
        except OSError:
            continue
        out[int(tid)] = (name, run_ns / 1e9, delay_ns / 1e9)
    return out


def by_role(ths, t0th):
    """Per role: workers by name; their io_uring helpers (io-wq threads,
    which run a worker's writes to tmpfs: shmem takes no non-blocking
    buffered write, so io_uring punts each one) as 'km-worker-N+io', by the
    TID in their name; the rest (the control thread) as 'other'. Figures
    over the timed span (minus what each thread had at t0)."""
    names = {tid: v[0] for tid, v in ths.items()}
    roles = {}
    for tid, (name, cpu, delay) in ths.items():
        c0, d0 = t0th.get(tid, (name, 0.0, 0.0))[1:]
        role = name
        if name.startswith("iou-wrk-"):
            owner = int(name[len("iou-wrk-"):])
            role = names.get(owner, "other")
            role = role + "+io" if role != "other" else role
        elif not name.startswith("km-worker-"):
            role = "other"
        r = roles.setdefault(role, [0.0, 0.0])
        r[0] += cpu - c0
        r[1] += delay - d0
    return roles


def preload(src, topic, nparts, size):
    count = MIB * 1024 * 1024 // size // nparts
    ps = [subprocess.Popen(
        [PRODUCE, "--bootstrap", src, "--topic", topic, "--partition", str(i),
         "--count", str(count), "--size", str(size), "--keys", "seq",
         "--mode", "plain", "--compression", "none",
         "--batch-size", "1048576", "--linger-ms", "20"],
        stdout=subprocess.DEVNULL) for i in range(nparts)]
    for p in ps:
        if p.wait() != 0:
            die(f"kmirror-produce to {topic} failed")
    return count * nparts


def same_logs(a, b, topic, n):
    """Each mirrored .log byte-identical to the source's (after the timed
    span): a fast mirror of the wrong bytes measures nothing."""
    for i in range(n):
        f = f"{topic}-{i}/00000000000000000000.log"
        with open(os.path.join(a, f), "rb") as x, open(os.path.join(b, f), "rb") as y:
            while True:
                u, v = x.read(1 << 22), y.read(1 << 22)
                if u != v:
                    die(f"{f}: the mirror's log differs from the source's")
                if not u:
                    break


def sample_waits(pid, waits):
    """Where each worker thread is asleep now, if it is: the kernel
    function it waits in (/proc/PID/task/TID/wchan), counted per worker
    with its runnable samples ('R': running or waiting for a core), so
    that the report says where a worker waits (io_cqring_wait: for its
    io_uring's completions, i.e. the source's bytes or its writes; a
    futex would be a lock)."""
    d = f"/proc/{pid}/task"
    for tid in os.listdir(d):
        try:
            with open(f"{d}/{tid}/comm") as f:
                name = f.read().strip()
            if not name.startswith("km-worker-"):
                continue
            with open(f"{d}/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            where = "R"
            if state != "R":
                with open(f"{d}/{tid}/wchan") as f:
                    where = f.read().strip() or state
        except OSError:
            continue
        w = waits.setdefault(name, {})
        w[where] = w.get(where, 0) + 1


def mirror_once(tmp, src, topic, end, nbytes, workers, source):
    data = os.path.join(tmp, f"b{workers}")
    shutil.rmtree(data, ignore_errors=True)
    sock = data + ".sock"
    p = start_kmirrord(data, sock, f"topics={topic}",
                       f"source.bootstrap.servers={src}", f"workers={workers}",
                       "flush.ms=20")
    c = Ctl(sock, p)
    deadline = time.monotonic() + 600
    # The first appended record starts the clock; what is appended by
    # then (the log end, not the durable high watermark, which follows
    # it by a flush) is not counted as moved in the timed span.
    while True:
        ps = parts_of(c.status(), topic)
        h0 = sum(x["leo"] for x in ps)
        if ps and h0 > 0:
            break
        if p.poll() is not None or time.monotonic() > deadline:
            die(f"mirror workers={workers} never started")
        time.sleep(0.002)
    t0, k0, s0 = time.monotonic(), proc_ticks(p.pid), proc_ticks(source.pid)
    th0, sth0 = threads(p.pid), threads(source.pid)
    perf = None
    if os.environ.get("WORKERS_PERF"):  # a profile of the timed span
        out = os.path.join(os.environ["WORKERS_PERF"],
                           f"perf.{topic}.w{workers}.data")
        perf = subprocess.Popen(["perf", "record", "-g", "-q", "-o", out,
                                 "-p", str(p.pid)], stderr=subprocess.DEVNULL)
    waits = {}
    while True:
        ps = parts_of(c.status(), topic)
        if sum(x["hw"] for x in ps) == end:
            break
        failed = [x for x in ps if x["state"] == "FAILED"]
        if failed:
            die(f"mirror workers={workers}: {failed[0]['partition']} FAILED: "
                f"{failed[0].get('reason', '')}")
        sample_waits(p.pid, waits)
        if p.poll() is not None or time.monotonic() > deadline:
            die(f"mirror workers={workers} did not catch up")
        time.sleep(0.01)
    t1, k1, s1 = time.monotonic(), proc_ticks(p.pid), proc_ticks(source.pid)
    roles = by_role(threads(p.pid), th0)
    sth = threads(source.pid)
    # The source's busiest thread: its front end, on one worker.
    src_thread = max(v[1] - sth0.get(t, (v[0], 0.0, 0.0))[1]
                     for t, v in sth.items())
    if perf is not None:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    owners = sorted(x["worker"] for x in ps)
    c.close()
    stop(p)
    same_logs(os.path.join(tmp, "a"), data, topic, len(ps))
    shutil.rmtree(data, ignore_errors=True)
    moved = nbytes * (1 - h0 / end)  # records are of one size
    secs = t1 - t0
    return dict(workers=workers, gbps=moved / secs / 1e9, secs=secs,
                waits=waits,
                cpu_s_gb=(k1 - k0) / HZ / (moved / 1e9),
                src_cpu_s=(s1 - s0) / HZ, src_thread_s=src_thread,
                roles=roles, owners=owners,
                moved=moved)


def show(case, r):
    ws = sorted(k for k in r["roles"] if k.startswith("km-worker-"))
    parts = []
    for k in ws + ["other"]:
        if k in r["roles"]:
            cpu, delay = r["roles"][k]
            # (run delay is charged when a thread gets its core, so a wait
            # begun before t0 may count: slept is a floor of zero)
            worker = k.startswith("km-worker-") and not k.endswith("+io")
            sleep = max(0.0, r["secs"] - cpu - delay) if worker else 0
            parts.append(f"{k} cpu {cpu:.2f}s runq {delay:.2f}s"
                         + (f" slept {sleep:.2f}s" if worker else ""))
    print(f"[{case}] workers={r['workers']}: {r['moved'] / 1e9:.3f} GB in "
          f"{r['secs']:.2f} s = {r['gbps']:.3f} GB/s, "
          f"{r['cpu_s_gb']:.2f} CPU s/GB; source {r['src_cpu_s']:.2f} CPU s "
          f"(its busiest thread {r['src_thread_s']:.2f}); "
          f"partitions per worker {owners_hist(r)}")
    print(f"[{case}]   " + "; ".join(parts))
    for k in sorted(r["waits"]):
        n = sum(r["waits"][k].values())
        top = sorted(r["waits"][k].items(), key=lambda kv: -kv[1])[:3]
        print(f"[{case}]   {k} samples ({n}): " + ", ".join(
            f"{'runnable' if w == 'R' else 'asleep in ' + w} {c / n:.0%}"
            for w, c in top))
    print(f"[{case}]   bounds: {capacity(r):.2f} GB/s with a core per worker "
          f"thread, {source_bound(r):.2f} GB/s by the source's busiest "
          f"thread, {machine_bound(r):.2f} GB/s by this machine's "
          f"{os.cpu_count()} cores")


def owners_hist(r):
    h = {}
    for o in r["owners"]:
        h[o] = h.get(o, 0) + 1
    return "/".join(str(h.get(w, 0)) for w in range(r["workers"]))


def workers_of(r):
    return {k: v for k, v in r["roles"].items()
            if k.startswith("km-worker-") and not k.endswith("+io")}


def capacity(r):
    """GB per second with a core per worker thread: the busiest worker
    thread's own CPU bounds it (a worker is one thread; its io-wq helpers
    run beside it, as many as it keeps busy)."""
    return r["moved"] / max(v[0] for v in workers_of(r).values()) / 1e9


def source_bound(r):
    """GB per second the source's busiest thread (kmirrord serves every
    client from one worker) allows at this run's CPU per byte."""
    return r["moved"] / r["src_thread_s"] / 1e9


def machine_bound(r):
    """GB per second this machine's cores allow at this run's CPU per
    byte, the mirror's (all its threads) and the source's together."""
    per_gb = (sum(v[0] for v in r["roles"].values()) + r["src_cpu_s"]) \
        / (r["moved"] / 1e9)
    return os.cpu_count() / per_gb


BOUNDS = (("a core per worker thread", lambda r: capacity(r)),
          ("the source's busiest thread", lambda r: source_bound(r)),
          (f"this machine's {os.cpu_count()} cores",
           lambda r: machine_bound(r)))


def ideal(r):
    """The run's GB/s on this machine were nothing else running: the
    lowest of its bounds, and which one that is."""
    return min((f(r), name) for name, f in BOUNDS)


def verdict(case, runs):
    one = [r for r in runs if r["workers"] == 1]
    two = [r for r in runs if r["workers"] == 2]
    pairs = list(zip(one, two))
    wall = statistics.median(b["gbps"] / a["gbps"] for a, b in pairs)
    cap = statistics.median(capacity(b) / capacity(a) for a, b in pairs)
    model = statistics.median(ideal(b)[0] / ideal(a)[0] for a, b in pairs)
    print(f"[{case}] workers=2 / workers=1, median of {len(two)}: "
          f"wall {wall:.2f}x; capacity (busiest worker thread's CPU) "
          f"{cap:.2f}x; idle-machine model {model:.2f}x; target wall >= "
          f"{TARGET}x: " + ("met" if wall >= TARGET else
                            "not met (" + why(pairs, cap, model) + ")"))
    return wall, cap, model


def why(pairs, cap, model):
    a, r = pairs[len(pairs) // 2]
    secs = r["secs"]
    delay = sum(v[1] for v in r["roles"].values()) / secs
    slept = min(max(0.0, secs - v[0] - v[1]) for v in workers_of(r).values())
    reasons = []
    if model < TARGET:
        (g1, b1), (g2, b2) = ideal(a), ideal(r)
        mirror = sum(v[0] for v in r["roles"].values()) / (r["moved"] / 1e9)
        src = r["src_cpu_s"] / (r["moved"] / 1e9)
        reasons.append(
            f"idle, workers=1 would be held at {g1:.2f} GB/s by {b1} and "
            f"workers=2 at {g2:.2f} GB/s by {b2} (the mirror {mirror:.2f} "
            f"CPU s/GB with its io-wq write threads, the source {src:.2f})")
    if cap < TARGET:
        reasons.append(f"kmirrord's busiest worker thread scales only "
                       f"{cap:.2f}x")
    if delay > 0.1:
        reasons.append(f"the mirror's threads waited {delay:.2f} cores' "
                       f"worth for a CPU (load {os.getloadavg()[0]:.1f})")
    if slept / secs > 0.2:
        reasons.append(f"a worker slept {slept / secs:.0%} of the run "
                       "waiting for the source's bytes")
    return "; ".join(reasons) or "noise: see the runs above"


def main():
    if not os.path.isdir("/dev/shm"):
        print("bench workers: no /dev/shm (tmpfs) here")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="kmirror-bench-workers.", dir="/dev/shm")
    try:
        run(tmp)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp):
    topics = []
    for case in CASES:
        size, n = case.split(":")
        topics.append((case, f"r{size}x{n}", int(n),
                       1024 * int(size.rstrip("k"))))
    a = os.path.join(tmp, "a")
    source = start_kmirrord(a, a + ".sock", "flush.ms=1000", "local.topics="
                            + ",".join(f"{t}:{n}" for _, t, n, _ in topics))
    ctl = Ctl(a + ".sock", source)
    while not os.path.exists(os.path.join(a, "kmirrord.port")):
        time.sleep(0.05)
    time.sleep(0.05)
    with open(os.path.join(a, "kmirrord.port")) as f:
        src = "127.0.0.1:" + f.read().strip()
    ends = {}
    for case, t, n, size in topics:
        end = preload(src, t, n, size)
        while sum(x["hw"] for x in parts_of(ctl.status(), t)) != end:
            time.sleep(0.05)
        nbytes = 0
        for d in os.listdir(a):
            if d.rsplit("-", 1)[0] == t:
                for f in os.listdir(os.path.join(a, d)):
                    if f.endswith(".log"):
                        nbytes += os.path.getsize(os.path.join(a, d, f))
        ends[t] = (end, nbytes)
        print(f"source {t}: {n} partitions, {end} records of {size} B, "
              f"{nbytes} bytes of log (tmpfs)")
    ctl.close()
    if SOURCE == "fast":  # the same logs, served a thread per connection
        stop(source)
        port_file = os.path.join(tmp, "fast.port")
        source = subprocess.Popen(
            [FAST, a, ",".join(t for _, t, _, _ in topics), port_file],
            preexec_fn=nice_fn())
        PROCS.append(source)
        while not os.path.exists(port_file):
            if source.poll() is not None:
                die("bench-fast-source exited")
            time.sleep(0.02)
        with open(port_file) as f:
            src = "127.0.0.1:" + f.read().strip()
    print(f"source: {SOURCE_WHAT[SOURCE]}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    results = {}
    for rep in range(REPS):
        for case, t, n, size in topics:
            # Each count goes first in turn: whatever the machine does to
            # the first run after a case's preload or a freed tmpfs falls
            # on both.
            for w in ((1, 2) if rep % 2 == 0 else (2, 1)):
                r = mirror_once(tmp, src, t, ends[t][0], ends[t][1], w, source)
                results.setdefault(case, []).append(r)
                show(case, r)
    print(f"load average {os.getloadavg()[0]:.2f}")
    for case, t, n, size in topics:
        verdict(case, results[case])
    stop(source)


if __name__ == "__main__":
    main()
