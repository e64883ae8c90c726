"""What every command and the daemon need: paths, settings and the store, each loaded once, on demand."""

from __future__ import annotations

from functools import cached_property

from memoryd.clock import Clock, SystemClock
from memoryd.paths import Paths
from memoryd.settings import Settings, load_settings
from memoryd.store import Store


class App:
    """``lasting``: the process goes on after this command (the daemon, the MCP and web servers),
    so what a pass leaves on the heap is worth handing back; a one-shot command just exits."""

    def __init__(
        self, paths: Paths | None = None, clock: Clock | None = None, *, lasting: bool = True
    ) -> None:
        self.paths = paths or Paths.from_env()
        self.clock = clock or SystemClock()
        self.lasting = lasting

    @cached_property
    def settings(self) -> Settings:
        return load_settings(self.paths.config_file)

    @cached_property
    def store(self) -> Store:
        self.paths.ensure_dir(self.paths.data_dir)
        return Store(self.paths.db, clock=self.clock)

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
