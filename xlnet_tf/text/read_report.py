"""ReadReport: what a reader read and what it skipped, and where (file:line), for the summary line
every CLI prints."""

import dataclasses
from typing import Dict, List


@dataclasses.dataclass
class ReadReport:
  read: int = 0
  skipped: Dict[str, List[str]] = dataclasses.field(default_factory=dict)

  def skip(self, reason: str, where: str) -> None:
    self.skipped.setdefault(reason, []).append(where)

  def summary(self) -> str:
    parts = [f"{self.read} examples"]
    parts += [f"skipped {len(w)} ({reason}, e.g. {', '.join(w[:3])})"
              for reason, w in self.skipped.items()]
    return "; ".join(parts)
