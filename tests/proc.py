"""Running the binary in tests without timing it: the CPU time a child used
(which another process on the machine does not stretch, as it does wall
time), and signals sent when the child reaches a state it shows, not after
a guessed delay. Every wait has a generous overall limit that only a hang
reaches."""
import os
import signal
import subprocess
import tempfile
import threading
import time

LIMIT = 900  # seconds: only a hang waits this long


def _cpu_of(pid):
    """CPU seconds (user + system) a live process has used so far, from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _reap(p, limit):
    """Waits for p (killing it after `limit` seconds): (returncode or None if killed, CPU seconds)."""
    killed = []

    def kill():
        killed.append(True)
        p.kill()

    timer = threading.Timer(limit, kill)
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    return (None if killed else p.returncode), ru.ru_utime + ru.ru_stime


def run_cpu(args, stdin=None, env=None, limit=LIMIT, data=None):
    """(returncode, stdout bytes, stderr text, CPU seconds); returncode None when it hung."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if data is not None:
            inp.write(data)
            inp.seek(0)
            stdin = inp
        p = subprocess.Popen(args, stdout=out, stderr=err, stdin=stdin or subprocess.DEVNULL, env=env)
        rc, cpu = _reap(p, limit)
        out.seek(0), err.seek(0)
        return rc, out.read(), err.read().decode(errors="replace"), cpu


def interrupt(args, sig, ready, limit=LIMIT, env=None):
    """Starts args and, once ready(stdout so far, stderr so far, CPU seconds so far) holds,
    sends sig. (returncode, stdout, stderr text, CPU seconds used after the signal);
    returncode "finished" when the child ended before it was ready, None when it hung."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        end = time.monotonic() + limit
        sent_cpu = None
        while time.monotonic() < end:
            if p.poll() is not None:
                break
            cpu = _cpu_of(p.pid)
            # pread: the child writes through the same file offsets, which a seek would move
            o = os.pread(out.fileno(), 1 << 16, 0)  # (the start of stdout is enough to see)
            e = os.pread(err.fileno(), 1 << 20, 0)
            if cpu is not None and ready(o, e, cpu):
                sent_cpu = cpu
                p.send_signal(sig)
                break
            time.sleep(0.01)  # polling for a state, with the limit above
        if sent_cpu is None and p.poll() is None:  # never ready: a hang
            p.kill()
        rc, cpu = _reap(p, max(1, end - time.monotonic()))
        out.seek(0), err.seek(0)
        o, e = out.read(), err.read().decode(errors="replace")
        if sent_cpu is None:
            return ("finished" if rc is not None else None), o, e, 0.0
        return rc, o, e, cpu - sent_cpu


def wait_until(pred, limit=LIMIT, every=0.02):
    """Polls pred() until it holds (True) or `limit` seconds pass (False)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(every)
    return pred()


def signal_delivered(pid, sig):
    """Whether sig is no longer pending for pid (its handler has run, or it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(ln.split(":", 1) for ln in f if ":" in ln)
    except OSError:
        return True
    bit = 1 << (int(sig) - 1)
    pend = int(status.get("SigPnd", "0").strip(), 16) | int(status.get("ShdPnd", "0").strip(), 16)
    return not pend & bit


__all__ = ["run_cpu", "interrupt", "wait_until", "signal_delivered", "LIMIT", "signal"]
