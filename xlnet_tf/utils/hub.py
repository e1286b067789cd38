"""A local directory for a name that is either a path or a Hugging Face hub id.

A name that is not a local path but reads as a hub repository id ("xlnet/xlnet-base-cased",
"xlnet-base-cased") is fetched through huggingface_hub's cache (HF_HOME / HF_HUB_CACHE):
online, only the files the caller picks from the repository's list; offline (HF_HUB_OFFLINE=1,
or the hub out of reach), the snapshot already cached for its main revision. huggingface_hub
is an optional dependency (`pip install "xlnet_tf[hub]"`), imported when a hub id is read.
A remote directory (gs://..., any `scheme://`: utils.files) is a path, never a hub id; so is a
name that reads as a local path (./x, ../x, /x, ~/x, a/b/c, model.ckpt): it is not there.

The hub is asked once, with a short timeout (HF_HUB_ETAG_TIMEOUT, when set), and never again
on failure: out of reach, a name that is no directory here fails in seconds, not after
huggingface_hub's retries.
"""

import os
import re
from typing import Callable, List, Sequence

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

# The hub's repository names: an optional owner, letters, digits, '-', '_' and '.'.
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
# A file's extension ends the name (model.ckpt, weights.h5): a path. A version ends in digits
# (org/model-1.5), and stays a hub id.
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,15}$")
# Seconds the hub has to answer whether a repository exists (HF_HUB_ETAG_TIMEOUT, when set).
LOOKUP_TIMEOUT = 5.0


def is_hub_id(name: str) -> bool:
  """Whether `name` can be a hub repository id: not a path with more than one folder, not
  absolute or relative to . .. ~, no '..' or '--' the hub refuses, no file extension."""
  return bool(_HUB_ID.match(name)) and ".." not in name and "--" not in name \
      and not name.endswith((".", "-")) and not _FILE_EXTENSION.search(name)


def local_directory(name: str, choose_files: Callable[[Sequence[str]], List[str]],
                    expected: str) -> str:
  """`name` when it is a local directory, else the local snapshot of the hub repository it
  names, holding the files `choose_files` picks from the repository's file list (patterns as
  fnmatch reads them). Errors name `name` and say what was `expected` there."""
  if files.isdir(name):
    return name
  if files.exists(name):
    raise UserInputError(f"{name}: a file; expected a directory holding {expected}")
  if files.is_remote(name) or not is_hub_id(name):
    raise FileNotFoundError(f"{name}: no such directory; expected a directory holding "
                            f"{expected}")
  return _hub_snapshot(name, choose_files, expected)


def _lookup_timeout() -> float:
  try:
    return float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or LOOKUP_TIMEOUT)
  except ValueError:
    return LOOKUP_TIMEOUT


def _hub_snapshot(repo_id: str, choose_files, expected: str) -> str:
  try:
    import huggingface_hub  # optional: only a hub id needs it
    from huggingface_hub import constants, errors
  except ImportError:
    raise FileNotFoundError(
        f"{repo_id}: no such directory (expected a directory holding {expected}); to read it "
        "as a Hugging Face hub id, install huggingface_hub (pip install \"xlnet_tf[hub]\")"
    ) from None
  unreachable = "HF_HUB_OFFLINE is set"
  if not constants.HF_HUB_OFFLINE:
    try:
      # One request: model_info does not retry (list_repo_files retries 5 times, 29 s).
      info = huggingface_hub.model_info(repo_id, expand=["siblings"],
                                        timeout=_lookup_timeout())
    except errors.RepositoryNotFoundError:
      raise FileNotFoundError(f"{repo_id}: no such directory, and no Hugging Face hub "
                              f"repository of that id (expected a directory holding "
                              f"{expected}, or a hub id)") from None
    except Exception as error:  # network, server, proxy: whatever it is, the cache may do
      unreachable = f"the hub is out of reach: {str(error).strip().splitlines()[0]}"
    else:
      names = [sibling.rfilename for sibling in info.siblings or []]
      return huggingface_hub.snapshot_download(repo_id, allow_patterns=choose_files(names))
  try:
    return huggingface_hub.snapshot_download(repo_id, local_files_only=True)
  except OSError:  # LocalEntryNotFoundError: nothing cached for it
    raise FileNotFoundError(
        f"{repo_id}: no such directory, and no snapshot of that Hugging Face hub id in the "
        f"cache {constants.HF_HUB_CACHE} ({unreachable}); expected a directory holding "
        f"{expected}, or a hub id") from None
