"""Reading the task files as UTF-8 text, with a bad byte reported at its file:line."""

from typing import List

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError


def read_utf8_lines(path: str) -> List[str]:
  """The lines of `path`, line ends kept (as `open(path, newline="")` gives them, for the csv
  module); bytes that are not UTF-8, and a NUL byte (a binary file), are an error naming the
  file and line.

  Split before decoding: a UTF-8 multi-byte character never holds a \\n or \\r byte, so the
  lines are those of the decoded text and the failing one is known.
  """
  raw_lines = files.read_bytes(path).splitlines(keepends=True)
  lines = []
  for number, raw in enumerate(raw_lines, start=1):
    if b"\0" in raw:  # valid UTF-8, but no text file holds one: a binary file given as text
      raise UserInputError(f"{path}:{number}: a NUL byte (column {raw.index(0) + 1}): not a "
                           "text file; give a UTF-8 text file")
    try:
      # A byte-order mark (Excel writes one) is not part of the first line's text.
      lines.append(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
    except UnicodeDecodeError as error:
      raise UserInputError(f"{path}:{number}: not valid UTF-8 (byte 0x{raw[error.start]:02x} "
                           f"at column {error.start + 1}); save the file as UTF-8") from None
  return lines
