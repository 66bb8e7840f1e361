"""Engines that behave differently on purpose, for tests of the decision: every other name is the wrapped engine's."""
import time


class Slowed:
    """An engine whose per-tick call sleeps ``seconds`` first: a lower bound on its time that load cannot undo."""

    def __init__(self, engine, seconds):
        self._engine, self._seconds = engine, seconds

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def tick_prepared(self, *args):
        time.sleep(self._seconds)
        return self._engine.tick_prepared(*args)


class Broken:
    """An engine whose per-tick call raises ``error`` (a kernel that does not compile for this device)."""

    def __init__(self, engine, error):
        self._engine, self._error = engine, error

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def tick_prepared(self, *args):
        raise self._error
