"""A stand-in for a node's logger: keeps each line with its level, in order."""
from __future__ import annotations


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, line: str) -> None:
        self.lines.append(("info", line))

    def warning(self, line: str) -> None:
        self.lines.append(("warning", line))

    def error(self, line: str) -> None:
        self.lines.append(("error", line))
