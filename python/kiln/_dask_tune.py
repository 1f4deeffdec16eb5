"""`kiln tune --dask SCHEDULER`: kiln.tune on a Dask cluster, run by the kiln executable, which
reads the result printed here as JSON. Errors are one line on stderr ("kiln: ...") and exit 1."""
import argparse
import json
import sys


def main(argv=None):
    p = argparse.ArgumentParser(prog="kiln tune --dask")
    p.add_argument("model")
    p.add_argument("--scheduler", required=True)
    p.add_argument("--objective", required=True)
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-length", type=int, default=0)
    p.add_argument("--planner-steps", type=int, default=2000)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    try:
        from distributed import Client
        import kiln
    except ImportError as e:
        print("kiln: --dask needs python3-distributed and the kiln package (%s)" % e,
              file=sys.stderr)
        return 1

    def progress(done, total, best):
        width = 30
        filled = min(width, done * width // max(total, 1))
        print("\r[%s%s] %d/%d  best %.6g " % ("#" * filled, "." * (width - filled), done, total,
                                              best), end="", file=sys.stderr, flush=True)

    try:
        with Client(a.scheduler, timeout="20s") as client:
            result = kiln.tune(a.model, objective=a.objective, budget=a.budget, seed=a.seed,
                               max_length=a.max_length, planner_steps=a.planner_steps,
                               client=client, progress=progress if a.progress else None)
    except kiln.KilnError as e:
        print("kiln: %s: %s" % (a.model, e), file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as e:
        print("kiln: --dask %s: cannot reach the scheduler (%s)" % (a.scheduler, e),
              file=sys.stderr)
        return 1
    if a.progress:
        print(file=sys.stderr)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
