"""The error type of bad input: what a user gave (a flag, a file, its contents) cannot be used.

Library checks of user input raise `UserInputError` with a message that names the input (the
flag, or `path:line`). The command-line tools print it as one line without a traceback (see
xlnet_tf.cli); any other exception is a bug and keeps its traceback. A ValueError, so callers
that catch ValueError still do.
"""


class UserInputError(ValueError):
  """A flag, file or value supplied by the user cannot be used; the message says which."""
