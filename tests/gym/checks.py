#!/usr/bin/python3
"""A tiny check recorder for the gym tests: every check prints one line; sections that raise are
recorded as failures and the next section runs; finish() exits non-zero when anything failed."""
import sys
import traceback

sys.dont_write_bytecode = True

import grpc  # noqa: E402


class Checks:
    def __init__(self):
        self.failures = []
        self.passed = 0
        self.section_name = ""

    def check(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("  ok   " + what, flush=True)
        else:
            msg = what + ((": " + str(detail)) if detail != "" else "")
            self.failures.append("[%s] %s" % (self.section_name, msg))
            print("  FAIL " + msg, flush=True)
        return bool(cond)

    def equal(self, got, want, what):
        return self.check(got == want, what + " (%r)" % (got,) if got == want else what,
                          "got %r, want %r" % (got, want))

    def code(self, fn, want, what):
        """Calls fn(); checks it raises grpc.RpcError with status `want`."""
        try:
            fn()
        except grpc.RpcError as e:
            got = e.code()
            return self.check(got == want, "%s -> %s" % (what, want.name),
                              "got %s (%s)" % (got.name if got else got, e.details()))
        return self.check(False, "%s -> %s" % (what, want.name), "the call succeeded")

    def section(self, name, fn, *args):
        self.section_name = name
        print("== " + name, flush=True)
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - any exception is this section's failure
            detail = e.details() if isinstance(e, grpc.RpcError) else ""
            self.failures.append("[%s] raised %s %s %s" % (name, type(e).__name__, e, detail))
            print("  FAIL raised: " + "".join(traceback.format_exception(type(e), e, e.__traceback__)),
                  flush=True)
            return None

    def finish(self):
        print("\n%d checks passed, %d failed" % (self.passed, len(self.failures)))
        for f in self.failures:
            print("FAILED " + f)
        sys.exit(1 if self.failures else 0)
