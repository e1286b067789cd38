"""utils.cpu_features: the flags of /proc/cpuinfo, and which of them make oneDNN's u8 x s8
product exact."""

from xlnet_tf.utils import cpu_features

AVX2_EPYC = ("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
             "flags\t\t: fpu sse2 avx fma avx2 bmi2\nbogomips\t: 4890.84\n\n"
             "processor\t: 1\nflags\t\t: fpu avx512_vnni\n")


def test_flags_are_the_first_cpus(tmp_path):
  path = tmp_path / "cpuinfo"
  path.write_text(AVX2_EPYC)
  flags = cpu_features.cpu_flags(str(path))
  assert flags == {"fpu", "sse2", "avx", "fma", "avx2", "bmi2"}
  assert not cpu_features.exact_u8_pairs(flags)


def test_a_vnni_or_amx_flag_makes_the_pairs_exact():
  for flag in ("avx512_vnni", "avx_vnni", "amx_int8"):
    assert cpu_features.exact_u8_pairs(frozenset({"avx2", flag})), flag
  assert not cpu_features.exact_u8_pairs(frozenset({"avx2", "avx512f", "avx512bw"}))


def test_no_cpuinfo_is_no_flags_and_not_exact(tmp_path):
  flags = cpu_features.cpu_flags(str(tmp_path / "absent"))
  assert flags == frozenset() and not cpu_features.exact_u8_pairs(flags)


def test_this_machines_answer_follows_its_flags():
  assert cpu_features.exact_u8_pairs() == cpu_features.exact_u8_pairs(cpu_features.cpu_flags())


def test_onednn_is_switched_on_unless_set(monkeypatch):
  monkeypatch.setattr(cpu_features, "is_x86", lambda: True)
  for before, after in [(None, "1"), ("0", "0"), ("1", "1")]:
    if before is None:
      monkeypatch.delenv(cpu_features.ONEDNN_SWITCH, raising=False)
    else:
      monkeypatch.setenv(cpu_features.ONEDNN_SWITCH, before)
    cpu_features.default_onednn_on()
    assert cpu_features.os.environ[cpu_features.ONEDNN_SWITCH] == after
    assert cpu_features.onednn_switched_off() == (after == "0")
  monkeypatch.setattr(cpu_features, "is_x86", lambda: False)
  monkeypatch.delenv(cpu_features.ONEDNN_SWITCH)
  cpu_features.default_onednn_on()
  assert cpu_features.ONEDNN_SWITCH not in cpu_features.os.environ
