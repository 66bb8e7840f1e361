"""Engines that behave differently on purpose, for tests of the decision: every other name is the wrapped engine's."""
import time


class _Wrapped:
    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)


class Slowed(_Wrapped):
    """An engine whose per-tick call sleeps ``seconds`` first: a lower bound on its time that load cannot undo."""

    def __init__(self, engine, seconds):
        super().__init__(engine)
        self._seconds = seconds

    def stepper(self, *args):
        step = self._engine.stepper(*args)

        def slowed():
            time.sleep(self._seconds)
            return step()

        return slowed

    def step(self, *args):
        return self.stepper(*args)()


class Broken(_Wrapped):
    """An engine whose per-tick call raises ``error`` (a kernel that does not compile for this device)."""

    def __init__(self, engine, error):
        super().__init__(engine)
        self._error = error

    def stepper(self, *args):
        def broken():
            raise self._error

        return broken

    def step(self, *args):
        raise self._error
