"""The elastic driver's blacklist: hosts lost in a generation, left out of the next ones for
good or, with --blacklist-cooldown-range, for a random span in it."""

import random
import time

from horovod.runner.supervise import _say


class Blacklist:
    def __init__(self, cooldown_range):
        self.cooldown = cooldown_range
        self.entries = {}  # host -> (until (monotonic; inf: for good), why)

    def add(self, host, why):
        span = random.uniform(*self.cooldown) if self.cooldown else float("inf")
        self.entries[host] = (time.monotonic() + span, why)
        return span

    def blocked(self, host):
        entry = self.entries.get(host)
        if entry and time.monotonic() >= entry[0]:
            del self.entries[host]
            _say(f"horovodrun: elastic: {host} may be used again (its blacklist cooldown passed)")
            return False
        return entry is not None

    def describe(self):
        return ", ".join(f"{h} ({why})" for h, (_, why) in self.entries.items()) or "none"
