"""ThreadSetting: the innermost `set` of this thread, restored on the way out (errors too),
never seen by another thread."""

import threading

import pytest

from xlnet_tf.utils.thread_settings import ThreadSetting


def test_nested_settings_restore_and_stay_on_their_thread():
  setting = ThreadSetting(default="default")
  seen_elsewhere = []
  with setting.set("outer"):
    with pytest.raises(RuntimeError):
      with setting.set("inner"):
        assert setting.value() == "inner"
        other = threading.Thread(target=lambda: seen_elsewhere.append(setting.value()))
        other.start()
        other.join()
        raise RuntimeError
    assert setting.value() == "outer"
  assert setting.value() == "default"
  assert seen_elsewhere == ["default"]
