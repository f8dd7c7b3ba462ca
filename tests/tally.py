"""The pass/fail/skip count the Python test stages share; run_all.sh reads the
closing line `NAME: P passed, F failed, S skipped`."""


class Tally:
    def __init__(self, stage):
        self.stage = stage
        self.passed = self.failed = self.skipped = 0

    def report(self, ok, name, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")

    def skip(self, name, why):
        self.skipped += 1
        print(f"skip {name}: {why}")

    def close(self):
        """Prints the closing line; returns the exit code."""
        print(f"{self.stage}: {self.passed} passed, {self.failed} failed, {self.skipped} skipped")
        return 1 if self.failed else 0
