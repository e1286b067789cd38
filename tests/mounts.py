"""Small file systems for the faults of a real disk: a tmpfs that fills after a few kilobytes,
one mounted read-only. Mounting needs root (the suite and CI run as root); elsewhere the tests
that need one are skipped, saying why."""

import contextlib
import os
import subprocess

import pytest


def _mount(*arguments) -> None:
  result = subprocess.run(["mount", *arguments], capture_output=True, text=True)
  if result.returncode != 0:
    pytest.skip(f"cannot mount a tmpfs here (root is needed): {result.stderr.strip()}")


@contextlib.contextmanager
def small_tmpfs(path, size_kb: int, read_only: bool = False):
  """A tmpfs of `size_kb` KiB at `path` (made), read-only if asked, unmounted at the end."""
  path = str(path)
  os.makedirs(path, exist_ok=True)
  _mount("-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", path)
  try:
    if read_only:
      _mount("-o", "remount,ro", path)
    yield path
  finally:
    subprocess.run(["umount", "-l", path], capture_output=True)


def fill(path: str, leave_bytes: int = 0) -> None:
  """Fills the file system of `path` up to `leave_bytes` free, with one file."""
  free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
  with open(os.path.join(path, "filler"), "wb") as handle:
    handle.write(b"\0" * max(0, free - leave_bytes))
