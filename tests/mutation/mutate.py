#!/usr/bin/env python3
"""Mutation testing of kmirror's critical lines (issue 22).

Goal: show that the tests catch a realistic one-line break of each rule that
matters (R1-R7, durability, group offsets): every mutant in the list must be
killed by the tests its entry names.

Method: the work tree (tracked and untracked, not ignored, files: HEAD
plus uncommitted changes; --tree names another checkout) is copied into a
scratch directory (default build-mutate/, reused by the next run, so only
what changed is rebuilt) and configured once like build/ (gcc,
debugoptimized, -Dtest_hooks=true). The
tests the list names are built and run once unmutated (the baseline: each
must pass and run at least one case, or its mutants could not be judged).
Then, one mutant at a time: its snippet (which must occur exactly once in
its file, or the whole list is refused) is replaced in the copy, the test
executables and what they drive are rebuilt, the tests run with a timeout,
and the file is restored. Outcomes: killed (a test failed), survived (all
passed), timeout (a test ran past --timeout), stillborn (the mutant does not
compile: a broken list entry, not a kill).

Usage: tests/mutation/mutate.py [ID-or-glob...] [--list] [--check] ...
Exit status: 0 every selected mutant killed; 1 otherwise; 2 the list, the
tree or the baseline is broken.
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEFAULT_LIST = os.path.join(REPO, "tests", "mutation", "mutants.txt")
DEFAULT_SCRATCH = os.path.join(REPO, "build-mutate")


class ListError(Exception):
    pass


def die(msg):
    """The tree or the build cannot be used: exit 2, as for a broken list."""
    print(msg, file=sys.stderr)
    sys.exit(2)


class Mutant:
    def __init__(self, mid, lineno):
        self.id = mid
        self.lineno = lineno
        self.file = None
        self.rule = None
        self.tests = []          # [(test name, gtest filter or None)]
        self.find = []
        self.repl = []
        self.status = None
        self.detail = ""
        self.seconds = 0.0

    @property
    def snippet(self):
        return "\n".join(self.find)

    @property
    def replacement(self):
        return "\n".join(self.repl)


def parse_list(path):
    """The list: blocks of `key: value` lines and `- `/`+ ` snippet lines.

    id: NAME            starts an entry
    file: PATH          relative to the tree
    rule: TEXT          what rule the mutant breaks (one line)
    tests: T[=F] ...    meson test names, each with an optional gtest filter
    - TEXT              a line of the snippet to find (exact, after "- ")
    + TEXT              a line of its replacement (none: the snippet goes)
    """
    mutants, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("- ") or line == "-":
                if cur is None:
                    raise ListError("%s:%d: snippet outside an entry" % (path, n))
                cur.find.append(line[2:])
                continue
            if line.startswith("+ ") or line == "+":
                if cur is None:
                    raise ListError("%s:%d: replacement outside an entry" % (path, n))
                cur.repl.append(line[2:])
                continue
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            key, sep, val = s.partition(":")
            if not sep:
                raise ListError("%s:%d: expected `key: value`" % (path, n))
            key, val = key.strip(), val.strip()
            if key == "id":
                cur = Mutant(val, n)
                mutants.append(cur)
            elif cur is None:
                raise ListError("%s:%d: `%s` before any `id:`" % (path, n, key))
            elif key == "file":
                cur.file = val
            elif key == "rule":
                cur.rule = val
            elif key == "tests":
                for t in val.split():
                    name, _, filt = t.partition("=")
                    cur.tests.append((name, filt or None))
            else:
                raise ListError("%s:%d: unknown key `%s`" % (path, n, key))
    return mutants


def check_entries(mutants, tree):
    """Every problem with the entries, as messages (none: the list holds)."""
    errs, seen = [], set()
    for m in mutants:
        where = "entry %s (line %d)" % (m.id, m.lineno)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", m.id):
            errs.append("%s: id may hold only letters, digits, . _ -" % where)
        if m.id in seen:
            errs.append("%s: duplicate id" % where)
        seen.add(m.id)
        if not m.file or not m.rule or not m.tests or not m.find:
            errs.append("%s: needs file, rule, tests and a `- ` snippet" % where)
            continue
        if m.snippet == m.replacement:
            errs.append("%s: the replacement equals the snippet" % where)
        path = os.path.join(tree, m.file)
        if not os.path.isfile(path):
            errs.append("%s: no file %s" % (where, m.file))
            continue
        with open(path, encoding="utf-8") as f:
            count = f.read().count(m.snippet)
        if count != 1:
            errs.append("%s: the snippet occurs %d times in %s (must be once)"
                        % (where, count, m.file))
    return errs


def tree_files(repo):
    out = subprocess.run(
        ["git", "-C", repo, "ls-files", "-z", "--cached", "--others",
         "--exclude-standard"], check=True, stdout=subprocess.PIPE).stdout
    return sorted({p for p in out.decode().split("\0")
                   if p and os.path.isfile(os.path.join(repo, p))})


def same_file(a, b):
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def sync_copy(repo, src):
    """Make src hold exactly the working tree's files. Unchanged files keep
    their times, so the build dir only rebuilds what changed (and a mutant
    an interrupted run left behind is overwritten)."""
    files = tree_files(repo)
    keep = set(files)
    copied = 0
    for rel in files:
        a, b = os.path.join(repo, rel), os.path.join(src, rel)
        if not same_file(a, b):
            os.makedirs(os.path.dirname(b), exist_ok=True)
            shutil.copy2(a, b)
            os.utime(b)  # newer than any object built from the old copy
            copied += 1
    for root, dirs, names in os.walk(src):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), src)
            if rel not in keep:
                os.unlink(os.path.join(root, name))
    return len(files), copied


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)


def configure(src, build):
    if os.path.isfile(os.path.join(build, "build.ninja")):
        # A meson.build the sync changed: regenerate before introspecting.
        r = run(["ninja", "-C", build, "build.ninja"])
        if r.returncode != 0:
            sys.stderr.write(r.stdout)
            die("mutate: regenerating %s failed" % build)
        return
    env = dict(os.environ, CC="gcc", CXX="g++")
    r = run(["meson", "setup", build, src, "-Dtest_hooks=true",
             "--buildtype=debugoptimized"], env=env)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        die("mutate: meson setup %s failed" % build)


def introspect(build):
    def load(what):
        r = run(["meson", "introspect", "--" + what, build])
        if r.returncode != 0:
            die("mutate: meson introspect --%s: %s" % (what, r.stdout))
        return json.loads(r.stdout)
    outputs = {t["id"]: t["filename"] for t in load("targets")}
    tests = {}
    for t in load("tests"):
        files = [f for d in t["depends"] for f in outputs.get(d, [])]
        tests[t["name"]] = dict(t, outputs=sorted(set(files)))
    return tests


def build_outputs(build, outputs, jobs):
    rel = [os.path.relpath(o, build) for o in outputs]
    return run(["ninja", "-C", build, "-j", str(jobs)] + rel)


GTEST_RAN = re.compile(r"^\[==========\] (\d+) tests? from .* ran\.", re.M)
GTEST_SKIPPED = re.compile(r"^\[  SKIPPED \] (\d+) tests?", re.M)


def run_test(t, filt, build, timeout):
    """@return (status, seconds, output): status 'pass', 'fail', 'timeout'."""
    cmd = list(t["cmd"])
    if filt:
        cmd.append("--gtest_filter=" + filt)
    env = dict(os.environ, **t["env"])
    start = time.monotonic()
    p = subprocess.Popen(cmd, cwd=t["workdir"] or build, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        status = "pass" if p.returncode == 0 else "fail"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        status = "timeout"
    except BaseException:
        # Its own session: a ^C of ours never reached it.
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    if status == "fail" and p.returncode == 77:
        status = "skip"
    return status, time.monotonic() - start, out.decode(errors="replace")


def unmatched_patterns(t, filt, build):
    """The positive patterns of filt that select no case on their own: a
    filter whose other patterns run cases would hide them in the count."""
    positive = filt.split("-", 1)[0]
    out = []
    for pat in [p for p in positive.split(":") if p]:
        cmd = list(t["cmd"]) + ["--gtest_list_tests", "--gtest_filter=" + pat]
        r = subprocess.run(cmd, cwd=t["workdir"] or build,
                           env=dict(os.environ, **t["env"]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
        if not re.search(r"^  \S", r.stdout.decode(errors="replace"), re.M):
            out.append(pat)
    return out


def spec_name(name, filt):
    return name + ("=" + filt if filt else "")


def baseline(specs, tests, build, timeout, log_dir):
    """Each (test, filter) unmutated: it must pass and run some case."""
    errs = []
    for name, filt in specs:
        t = tests[name]
        status, secs, out = run_test(t, filt, build, timeout)
        label = spec_name(name, filt)
        ran = GTEST_RAN.search(out)
        skipped = GTEST_SKIPPED.search(out)
        why = None
        if status != "pass":
            why = status
        elif t["protocol"] == "gtest" and (ran is None or int(ran.group(1)) == 0):
            why = "its filter runs no case"
        elif t["protocol"] == "gtest" and skipped and ran and \
                int(skipped.group(1)) >= int(ran.group(1)):
            why = "every case skipped (%s)" % skip_reason(out)
        elif t["protocol"] == "gtest" and filt and \
                unmatched_patterns(t, filt, build):
            why = "pattern %s selects no case" % \
                ", ".join(unmatched_patterns(t, filt, build))
        print("  baseline %-60s %6.1fs %s" % (label, secs, why or "ok"),
              flush=True)
        if why:
            path = os.path.join(log_dir, "baseline-%s.log" % name)
            with open(path, "w") as f:
                f.write(out)
            errs.append("%s: %s (output: %s)" % (label, why, path))
    return errs


def skip_reason(out):
    m = re.search(r"Skipped\s*\n(.*)", out)
    return m.group(1).strip() if m else "see the output"


def mutate_one(m, src, build, tests, jobs, timeout, log_dir):
    path = os.path.join(src, m.file)
    with open(path, encoding="utf-8") as f:
        orig = f.read()
    log = []
    start = time.monotonic()
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(orig.replace(m.snippet, m.replacement, 1))
        outputs = sorted({o for name, _ in m.tests
                          for o in tests[name]["outputs"]})
        r = build_outputs(build, outputs, jobs)
        log.append(r.stdout)
        if r.returncode != 0:
            m.status, m.detail = "stillborn", "does not compile"
        else:
            m.status = "survived"
            for name, filt in m.tests:
                status, secs, out = run_test(tests[name], filt, build, timeout)
                log.append("==== %s: %s in %.1fs\n%s"
                           % (spec_name(name, filt), status, secs, out))
                if status in ("fail", "timeout"):
                    m.status = "killed" if status == "fail" else "timeout"
                    m.detail = "by " + spec_name(name, filt)
                    break
                if status == "skip":
                    m.detail = "%s skipped" % name
    finally:
        with open(path, "w", encoding="utf-8") as f:
            f.write(orig)
        m.seconds = time.monotonic() - start
        with open(os.path.join(log_dir, m.id + ".log"), "w") as f:
            f.write("\n".join(log))


def select(mutants, patterns):
    if not patterns:
        return mutants
    chosen = [m for m in mutants
              if any(fnmatch.fnmatchcase(m.id, p) for p in patterns)]
    if not chosen:
        print("mutate: no mutant matches %s" % " ".join(patterns),
              file=sys.stderr)
        sys.exit(2)
    return chosen


def report(chosen, elapsed, out):
    print("\n%-28s %-10s %7s  %s" % ("mutant", "outcome", "seconds", "detail"),
          file=out)
    for m in chosen:
        print("%-28s %-10s %7.1f  %s" % (m.id, m.status, m.seconds, m.detail),
              file=out)
    n = len(chosen)
    count = {s: sum(m.status == s for m in chosen)
             for s in ("killed", "survived", "stillborn", "timeout")}
    judged = n - count["stillborn"]
    rate = 100.0 * count["killed"] / judged if judged else 0.0
    print("\nmutants: %d, killed %d, survived %d, stillborn %d, timeout %d, "
          "kill rate %.1f%% (%.0f s)" % (n, count["killed"], count["survived"],
                                         count["stillborn"], count["timeout"],
                                         rate, elapsed), file=out)
    for s in ("survived", "timeout", "stillborn"):
        for m in chosen:
            if m.status == s:
                print("  %s %s (%s): %s" % (s.upper(), m.id, m.file, m.rule),
                      file=out)
    return 0 if count["killed"] == n else 1


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Apply the mutants of tests/mutation/mutants.txt one at a "
        "time to a scratch copy of the tree and run the tests that should "
        "kill each.")
    ap.add_argument("ids", nargs="*", metavar="ID",
                    help="mutant ids or shell globs (default: all)")
    ap.add_argument("--list", action="store_true",
                    help="print the mutants and their tests, run nothing")
    ap.add_argument("--check", action="store_true",
                    help="only check that every snippet occurs once")
    ap.add_argument("--file", default=DEFAULT_LIST, help="the mutant list")
    ap.add_argument("--tree", default=REPO,
                    help="the git work tree to copy and mutate (default: the "
                    "one holding this script)")
    ap.add_argument("--scratch", default=DEFAULT_SCRATCH,
                    help="copy and build dir, kept and reused (default: "
                    "build-mutate/ in the tree holding this script)")
    ap.add_argument("--fresh", action="store_true",
                    help="remove the scratch dir first (full rebuild)")
    ap.add_argument("--timeout", type=float, default=240,
                    help="seconds per test run (default 240)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="ninja -j for the builds (default 2)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the unmutated run of the tests")
    return ap.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    try:
        mutants = parse_list(a.file)
    except ListError as e:
        print("mutate: %s" % e, file=sys.stderr)
        return 2
    tree = os.path.abspath(a.tree)
    errs = check_entries(mutants, tree)
    chosen = select(mutants, a.ids)
    if a.list:
        for m in chosen:
            print("%-28s %-40s %s\n%28s rule: %s" % (
                m.id, m.file, " ".join(spec_name(*t) for t in m.tests), "",
                m.rule))
    if errs:
        print("mutate: the list does not hold:\n  " + "\n  ".join(errs),
              file=sys.stderr)
        return 2
    if a.list or a.check:
        if a.check:
            print("mutate: %d mutants, every snippet found once" % len(mutants))
        return 0
    scratch = os.path.abspath(a.scratch)
    if a.fresh and os.path.isdir(scratch):
        shutil.rmtree(scratch)
    src, build = os.path.join(scratch, "src"), os.path.join(scratch, "build")
    log_dir = os.path.join(scratch, "logs")
    os.makedirs(src, exist_ok=True)
    os.makedirs(log_dir, exist_ok=True)
    start = time.monotonic()
    n_files, copied = sync_copy(tree, src)
    print("mutate: %s: %d files, %d copied; build dir %s"
          % (src, n_files, copied, build), flush=True)
    configure(src, build)
    tests = introspect(build)
    unknown = sorted({name for m in chosen for name, _ in m.tests
                      if name not in tests})
    if unknown:
        print("mutate: no such meson test: %s" % " ".join(unknown),
              file=sys.stderr)
        return 2
    outputs = sorted({o for m in chosen for name, _ in m.tests
                      for o in tests[name]["outputs"]})
    print("mutate: building %d targets" % len(outputs), flush=True)
    r = build_outputs(build, outputs, a.jobs)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:])
        print("mutate: the unmutated tree does not build", file=sys.stderr)
        return 2
    specs = []
    for m in chosen:
        for t in m.tests:
            if t not in specs:
                specs.append(t)
    if not a.no_baseline:
        print("mutate: baseline (%d test runs, unmutated)" % len(specs),
              flush=True)
        errs = baseline(specs, tests, build, a.timeout, log_dir)
        if errs:
            print("mutate: the baseline fails, no mutant can be judged:\n  "
                  + "\n  ".join(errs), file=sys.stderr)
            return 2
    print("mutate: %d mutants (logs in %s)" % (len(chosen), log_dir),
          flush=True)
    for i, m in enumerate(chosen, 1):
        mutate_one(m, src, build, tests, a.jobs, a.timeout, log_dir)
        print("  [%2d/%d] %-28s %-10s %6.1fs %s" % (
            i, len(chosen), m.id, m.status, m.seconds, m.detail), flush=True)
    elapsed = time.monotonic() - start
    with open(os.path.join(scratch, "last-run.txt"), "w") as f:
        f.write("%s, tree %s at %s\n" % (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), tree,
            tree_rev(tree)))
        report(chosen, elapsed, f)
    return report(chosen, elapsed, sys.stdout)


def tree_rev(tree):
    r = run(["git", "-C", tree, "describe", "--always", "--dirty"])
    return r.stdout.strip() if r.returncode == 0 else "unknown"


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("\nmutate: interrupted (the mutated file was restored)",
              file=sys.stderr)
        sys.exit(130)
