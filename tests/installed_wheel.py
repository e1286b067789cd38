"""The package as a user installs it: the wheel built from this checkout, installed (not
editable) into a fresh virtual environment, whose console scripts the tests then run from a
directory outside the checkout."""

import fcntl
import os
import subprocess
import sys
import sysconfig
import tempfile
import venv

from repository import ROOT


def user_environment() -> dict:
  """This process's environment without PYTHONPATH: a user's shell, where the wheel's
  xlnet_tf is the one imported (a PYTHONPATH naming a checkout would put its xlnet_tf and
  egg-info first, and pip would take the wheel as installed already)."""
  return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def install_wheel(work: str) -> str:
  """Builds the wheel into work/dist, installs it into the new venv work/venv and returns that
  venv's bin/ folder. The venv borrows this interpreter's dependencies (a .pth file appends its
  site-packages, whose own .pth files, the editable install's finder among them, are not run),
  so only xlnet_tf comes from the wheel."""
  dist, environment = os.path.join(work, "dist"), os.path.join(work, "venv")
  user = user_environment()
  # One build at a time: setuptools builds in the checkout's build/ folder, and two test
  # workers building at once gave a wheel without its console scripts.
  with open(os.path.join(tempfile.gettempdir(), "xlnet_tf_wheel_build.lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", dist, ROOT], check=True, capture_output=True,
                   env=user)
  venv.create(environment, with_pip=False)
  python = os.path.join(environment, "bin", "python")
  site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        check=True, capture_output=True, text=True,
                        env=user).stdout.strip()
  with open(os.path.join(site, "test_venv_dependencies.pth"), "w", encoding="utf-8") as handle:
    handle.write(sysconfig.get_paths()["purelib"] + "\n")
  wheels = [os.path.join(dist, name) for name in os.listdir(dist) if name.endswith(".whl")]
  subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
                  "--no-index", *wheels], check=True, capture_output=True,
                 env=user)
  return os.path.join(environment, "bin")
