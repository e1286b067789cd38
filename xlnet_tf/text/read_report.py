"""ReadReport: what a reader read, what it skipped and what it kept but changed (truncated, ...),
and where (file:line), for the summary line every CLI prints once reading is done."""

import dataclasses
from typing import Dict, List


@dataclasses.dataclass
class ReadReport:
  """What a reader read, skipped and changed, with where (file:line): its summary line.

  Attributes:
    read: the examples read (and kept).
    skipped: {reason: [where]} of the examples left out.
    noted: {change: [where]} of the examples kept but changed (truncated, ...).
  """
  read: int = 0
  skipped: Dict[str, List[str]] = dataclasses.field(default_factory=dict)  # not used
  noted: Dict[str, List[str]] = dataclasses.field(default_factory=dict)    # used, changed

  def skip(self, reason: str, where: str) -> None:
    """Notes an example left out; `read` does not count it.

    Args:
      reason: why it was left out (e.g. "no label").
      where: where it was (file:line).
    """
    self.skipped.setdefault(reason, []).append(where)

  def note(self, change: str, where: str) -> None:
    """Notes an example kept, but not whole.

    Args:
      change: what was changed (e.g. "truncated to max_seq_length=128").
      where: where it was (file:line).
    """
    self.noted.setdefault(change, []).append(where)

  def summary(self) -> str:
    """The report in one line, with up to three places of each change and reason.

    Returns:
      E.g. '40 examples; 3 truncated to ... (e.g. f:2, f:5, f:9); skipped 2 (no label, e.g.
      f:7)'.
    """
    parts = [f"{self.read} examples"]
    parts += [f"{len(w)} {change} (e.g. {', '.join(w[:3])})" for change, w in self.noted.items()]
    parts += [f"skipped {len(w)} ({reason}, e.g. {', '.join(w[:3])})"
              for reason, w in self.skipped.items()]
    return "; ".join(parts)
