"""An export's version directory, `<export_base>/<model_name>/<version>/`: there complete, or
not at all.

TF Serving polls a model's base path (every --file_system_poll_wait_seconds) and loads every
child whose name parses as a version number (file_system_storage_path_source.cc,
`strings::safe_strto64`: optional spaces, an optional '-', then digits only), at once. So a
version directory must hold saved_model.pb, variables/, assets/ and assets.extra/ from the
moment it can be listed, and an export's work folder must have a name that is never a version.

- A local base: the files are written into `<model_name>/.export-<version>-<pid>@<host>-<rand>/`
  (a dot name: no version) and renamed to `<version>` when complete: one rename within one
  file system, atomic. A failed export removes its folder (and the model and base folders it
  made); a killed one leaves it, and the next export of that version removes it, or refuses to
  share the version with an export still running (utils.temporary_folders).
- An existing version is refused, naming --version, unless `overwrite`: then the complete new
  folder and the old version are swapped in one call (Linux renameat2 RENAME_EXCHANGE; where
  that is missing, two renames, between which the version is briefly absent) and the old one is
  removed. A running TF Serving keeps serving the version it loaded (it keys servables by
  number): a new number is what reaches it.
- A remote base (gs://..., any tf.io.gfile file system: utils.files) has no atomic rename of
  a directory (GCS renames object by object). The files are written in a local temporary
  folder and copied into `<version>/` with the file that makes the export loadable
  (saved_model.pb, model.onnx, model.tflite) last, so no reader finds a SavedModel before its
  variables and assets are there. A model server that lists the version during the copy fails
  that load and retries it (TF Serving: --max_num_load_retries=5, a minute apart, by default).
  A failed copy removes what it copied. An existing remote version is refused even with
  `overwrite`: it cannot be replaced in one step.
"""

import contextlib
import os
from typing import Iterator

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.whole_directories import staged_directory

SAVED_MODEL_FILE = "saved_model.pb"


def work_folder_prefix(version: str) -> str:
  """The name the work folders of `version`'s exports start with; a dot name, never a version
  number to TF Serving."""
  return f".export-{version}-"


def check_version_free(directory: str, overwrite: bool = False) -> None:
  """Raises UserInputError (one line naming the directory and --version) when the version
  directory exists and may not be replaced: always without `overwrite`, and for a remote one
  (see the module docstring)."""
  if not files.exists(directory):
    return
  version = os.path.basename(directory.rstrip("/"))
  if not overwrite:
    raise UserInputError(f"{directory}: version {version} exists; export under another "
                         "--version (TF Serving serves the highest), or pass --overwrite to "
                         "replace it")
  if files.is_remote(directory):
    raise UserInputError(f"{directory}: version {version} exists, and a remote version "
                         "cannot be replaced in one step (--overwrite is for local bases); "
                         "export under another --version")


@contextlib.contextmanager
def staged_version(directory: str, overwrite: bool = False,
                   last: str = SAVED_MODEL_FILE) -> Iterator[str]:
  """A folder to write the export into; when the block ends without an error, it becomes
  `directory` (see the module docstring: `last` is the file a remote copy writes last). An
  error in the block, or in placing the folder, leaves no version, no work folder, and no
  model or base folder that this call made (utils.whole_directories)."""
  directory = files.absolute(directory).rstrip("/")
  check_version_free(directory, overwrite)
  try:
    with staged_directory(directory, replace=overwrite, last=last,
                          prefix=work_folder_prefix(os.path.basename(directory))) as staging:
      yield staging
  except FileExistsError:  # made by another process meanwhile
    check_version_free(directory)
    raise
