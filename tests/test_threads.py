#!/usr/bin/python3
"""Threads on a shared machine: the default thread count, and a pool that gives
way when its CPUs are busy.

- The default -t is the physical cores of the CPUs the process may run on
  (its affinity: taskset, cpusets, Slurm), at most its cgroup's CPU quota,
  computed here from sysfs and /proc independently of the C code;
  SMALLMIND_THREADS, then OMP_NUM_THREADS, override it; bad values are
  usage errors naming the variable.
- Two threads on one CPU (taskset), alone and next to a spinning process,
  and the default threads with every CPU busy: the CPU time the run uses
  stays within a factor of one thread's (a pool that spins at its barriers
  burns the CPU its other thread needs: tens of times more), and the text is
  the same. CPU time, not wall time: the checks hold on a loaded machine.

    test_threads.py --bin build --model models/default
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc import run_cpu  # noqa: E402
from tally import Tally  # noqa: E402

TALLY = Tally("threads")
report, skip = TALLY.report, TALLY.skip
CPU_FACTOR = 1.5  # CPU time of a contended run over one thread's, at most
CPU_SLACK = 0.1   # seconds: starting threads, the model's load


def records(out):
    """The batch records without their timing."""
    recs = [json.loads(ln) for ln in out.decode().splitlines() if ln.strip()]
    return [{k: v for k, v in r.items() if k != "timing"} for r in recs]


def threads_used(stderr):
    """The thread count of --stats' load line."""
    m = re.search(r"kernels, (\d+) threads?,", stderr)
    return int(m.group(1)) if m else None


def physical_cores(cpus):
    """Distinct (package, core) pairs among `cpus`, from sysfs (the CPU count without topology)."""
    seen = set()
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            with open(base + "physical_package_id") as f1, open(base + "core_id") as f2:
                seen.add((int(f1.read()), int(f2.read())))
        except (OSError, ValueError):
            return len(cpus)
    return len(seen) or len(cpus)


def cgroup_quota():
    """This process's CPU quota in CPUs (the smallest along its cgroup path), or None."""
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return None
    best = None
    for ln in lines:
        hid, ctrls, path = ln.split(":", 2)
        if "cpu" in ctrls.split(","):  # v1
            for root in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"):
                try:
                    q = int(open(f"{root}{path}/cpu.cfs_quota_us").read())
                    per = int(open(f"{root}{path}/cpu.cfs_period_us").read())
                except (OSError, ValueError):
                    continue
                if q > 0 and per > 0:
                    return q / per
            return None
    for ln in lines:
        hid, ctrls, path = ln.split(":", 2)
        if hid == "0" and ctrls == "":  # v2: the path and its ancestors
            parts = [p for p in path.split("/") if p]
            for k in range(len(parts), -1, -1):
                try:
                    q, per = open("/sys/fs/cgroup/" + "/".join(parts[:k]) + "/cpu.max").read().split()
                except (OSError, ValueError):
                    continue
                if q != "max" and float(per) > 0:
                    best = min(best or math.inf, float(q) / float(per))
    return best


def expected_default(cpus=None):
    cpus = cpus if cpus is not None else sorted(os.sched_getaffinity(0))
    n = physical_cores(cpus)
    q = cgroup_quota()
    if q:
        n = min(n, math.ceil(q))
    return max(1, min(n, 256))


def spinner(cpu=None):
    """A process that spins until killed (on `cpu` when given)."""
    code = "while True: pass"
    args = [sys.executable, "-c", code]
    if cpu is not None:
        args = ["taskset", "-c", str(cpu)] + args
    return subprocess.Popen(args, stdin=subprocess.DEVNULL)


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def defaults(sm, model, tmp):
    base = {k: v for k, v in os.environ.items() if k not in ("SMALLMIND_THREADS", "OMP_NUM_THREADS")}
    gen = [sm, "generate", "-m", model, "-p", "And", "-n", "2", "--stats"]

    def used(env=None, prefix=(), extra=()):
        rc, _, err, _ = run_cpu(list(prefix) + gen + list(extra), env=dict(base, **(env or {})))
        return rc, threads_used(err), err

    rc, n, err = used()
    want = expected_default()
    report(rc == 0 and n == want, "the default threads: physical cores of the CPU set, within the quota",
           f"{n} (want {want}: CPUs {sorted(os.sched_getaffinity(0))}, quota {cgroup_quota()})")
    if shutil.which("taskset"):
        first = min(os.sched_getaffinity(0))
        rc, n, err = used(prefix=["taskset", "-c", str(first)])
        report(rc == 0 and n == 1, "taskset -c one CPU: 1 thread by default", f"{n}" if n is not None else err[-200:])
    else:
        skip("taskset -c one CPU", "taskset is absent (util-linux)")
    for env, extra, want, what in (
            ({"SMALLMIND_THREADS": "3"}, (), 3, "SMALLMIND_THREADS=3"),
            ({"OMP_NUM_THREADS": "2,1"}, (), 2, "OMP_NUM_THREADS=2,1 (its first level)"),
            ({"SMALLMIND_THREADS": "1", "OMP_NUM_THREADS": "3"}, (), 1, "SMALLMIND_THREADS before OMP_NUM_THREADS"),
            ({"SMALLMIND_THREADS": "3"}, ("-t", "2"), 2, "-t before SMALLMIND_THREADS"),
            ({"OMP_NUM_THREADS": ""}, (), expected_default(), "OMP_NUM_THREADS='' is unset")):
        rc, n, err = used(env, extra=extra)
        report(rc == 0 and n == want, what, f"{n}" if n is not None else err[-200:])
    for var in ("SMALLMIND_THREADS", "OMP_NUM_THREADS"):
        rc, n, err = used({var: "lots"})
        report(rc == 2 and var in err and len(err.strip().splitlines()) == 1,
               f"{var}=lots: a usage error naming it", err.strip()[:120])

    # a cgroup with a quota of one CPU (root, with the cpu controller mounted)
    made = None
    for root, qfile, qval in (("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "100000"),
                              ("/sys/fs/cgroup/cpu,cpuacct", "cpu.cfs_quota_us", "100000"),
                              ("/sys/fs/cgroup", "cpu.max", "100000 100000")):
        d = os.path.join(root, f"smallmind-test-{os.getpid()}")
        try:
            os.mkdir(d)
        except OSError:
            continue
        try:
            with open(os.path.join(d, qfile), "w") as f:
                f.write(qval)
            made = d
            break
        except OSError:
            os.rmdir(d)
    if made and os.path.exists(os.path.join(made, "cgroup.procs")):
        procs = os.path.join(made, "cgroup.procs")
        rc, n, err = used(prefix=["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"])
        report(rc == 0 and (n == 1 or len(os.sched_getaffinity(0)) == 1),
               "a cgroup with a quota of one CPU: 1 thread by default", f"{n}" if n is not None else err[-200:])
    else:
        skip("a cgroup with a quota of one CPU", "cannot make a cgroup here (needs root and a cgroup "
             "file system with the cpu controller)")
    if made:
        os.rmdir(made)


def contention(sm, model, tmp):
    """CPU time of contended runs against one thread's, on the same records."""
    recs = os.path.join(tmp, "recs.txt")
    with open(recs, "w") as f:
        for i in range(8):
            f.write(f"And God said {i}\n")
    job = [sm, "generate", "-m", model, "--batch", recs, "-n", "250", "--temp", "0", "--parallel", "1",
           "--stats"]
    if not shutil.which("taskset"):
        skip("two threads on one CPU", "taskset is absent (util-linux)")
        return
    cpu = min(os.sched_getaffinity(0))
    pin = ["taskset", "-c", str(cpu)]

    def compare(what, prefix, threads, busy):
        # A pool that spins burns tens of times one thread's CPU time; a guest's steal and
        # noise add up to ~1.7x to one sample, so a pair is taken up to three times and the
        # check holds when one pair is within the factor (the records must match in every one).
        samples, ok, same = [], False, True
        for _ in range(3):
            loops = [spinner(c) for c in busy]
            try:
                rc1, out1, err1, c1 = run_cpu(prefix + job + ["-t", "1"])
                rc2, out2, err2, c2 = run_cpu(prefix + job + (["-t", str(threads)] if threads else []))
            finally:
                stop(loops)
            same = same and rc1 == 0 and rc2 == 0 and records(out1) == records(out2) and \
                len(records(out1)) == 8
            samples.append(f"{c2:.2f} s vs {c1:.2f} s")
            if not same or c2 <= CPU_FACTOR * c1 + CPU_SLACK:
                ok = same
                break
        line = next((ln for ln in err2.splitlines() if ln.startswith("threads:")), "")
        report(ok, f"{what}: CPU time within {CPU_FACTOR}x of one thread's, the same records",
               f"{'; '.join(samples)} ({line})")

    compare("-t 2 on one CPU", pin, 2, [])
    compare("-t 2 on one CPU beside a spinning process", pin, 2, [cpu])
    mine = sorted(os.sched_getaffinity(0))[:4]  # at most 4 CPUs, each with a spinning process
    if len(mine) >= 2:
        compare(f"default threads with {len(mine)} CPUs all busy",
                ["taskset", "-c", ",".join(map(str, mine))], 0, mine)
    else:
        skip("default threads with every CPU busy", "one CPU")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    sm = os.path.join(a.bin, "smallmind")
    with tempfile.TemporaryDirectory() as tmp:
        defaults(sm, a.model, tmp)
        contention(sm, a.model, tmp)
    return TALLY.close()


if __name__ == "__main__":
    sys.exit(main())
