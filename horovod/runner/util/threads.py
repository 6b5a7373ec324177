"""horovod.runner.util.threads: `in_thread`, as upstream's (its test utilities use it)."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs target(*args) on a new thread and returns the started thread; `silent` drops the
    target's exceptions."""
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple, not {type(args).__name__} (one argument: (arg,))")

    def run(*a):
        try:
            target(*a)
        except Exception:
            if not silent:
                raise

    thread = threading.Thread(target=run, args=args, name=name, daemon=daemon)
    thread.start()
    return thread
