"""One rank's process, started by its Spark task (horovod/spark/task.py) as
`python -m horovod.spark.child WORKDIR`: loads (fn, args, kwargs) from WORKDIR/fn.pkl, runs fn
and writes WORKDIR/result.pkl, a pickled dict:
  {"ok": True, "value": <cloudpickled result>}, or
  {"ok": False, "type": "module.QualName", "text": str(exc), "traceback": "...",
   "exception": <cloudpickled exception, or None when it cannot be pickled>}.

Why a process of its own: a crash or os._exit in fn, or the task stopping it, must not take the
Spark Python worker down; and the engine's state (hvd.init) ends with the rank.
"""

import os
import sys
import traceback

from horovod.spark.task import FN_FILE, RESULT_FILE

# Exit status when fn raised (the record says what); any other non-zero one came from fn.
RAISED_EXIT = 1


def _cloudpickle():
    from pyspark import cloudpickle  # the copy pyspark ships and pickles closures with

    return cloudpickle


def error_record(exc, text=None):
    """The record of an exception; its pickled form only when it pickles and loads back."""
    cp = _cloudpickle()
    try:
        pickled = cp.dumps(exc)
        cp.loads(pickled)
    except Exception:
        pickled = None
    kind = type(exc)
    return {
        "ok": False,
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "text": str(exc) if text is None else text,
        "traceback": "".join(traceback.format_exception(kind, exc, exc.__traceback__)),
        "exception": pickled,
    }


def run(workdir):
    """Runs the function of `workdir` and writes its record; returns the exit status."""
    cp = _cloudpickle()
    rank = os.environ.get("HOROVOD_RANK", "?")
    try:
        with open(os.path.join(workdir, FN_FILE), "rb") as f:
            fn, args, kwargs = cp.load(f)
    except Exception as e:
        record = error_record(e, f"cannot load fn on rank {rank}: {type(e).__name__}: {e}")
    else:
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:  # SystemExit and KeyboardInterrupt included: no result
            record = error_record(e)
        else:
            try:
                record = {"ok": True, "value": cp.dumps(value)}
            except Exception as e:
                text = (
                    f"the result of {getattr(fn, '__qualname__', fn)!s} on rank {rank} cannot "
                    f"be pickled ({type(value).__name__}): {type(e).__name__}: {e}"
                )
                record = error_record(e, text)
    sys.stdout.flush()
    sys.stderr.flush()
    partial = os.path.join(workdir, RESULT_FILE + ".part")
    with open(partial, "wb") as f:
        cp.dump(record, f)
    os.replace(partial, os.path.join(workdir, RESULT_FILE))  # the task sees all of it or none
    return 0 if record["ok"] else RAISED_EXIT


if __name__ == "__main__":
    sys.exit(run(sys.argv[1]))
