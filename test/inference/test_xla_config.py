"""The XLA flags the engine adds: a user's own setting wins, nothing is duplicated."""
from bayes_infer_ros.inference.xla_config import DEFAULT_BACKEND_OPTIONS, merged_flags

KEY = "xla_cpu_small_while_loop_byte_threshold"


def test_adds_the_option_when_absent():
    out = merged_flags("")
    assert out == f"--xla_backend_extra_options={KEY}={DEFAULT_BACKEND_OPTIONS[KEY]}"


def test_appends_to_existing_backend_options_and_keeps_other_flags():
    out = merged_flags("--xla_dump_to=/tmp/x --xla_backend_extra_options=foo=1")
    assert out == f"--xla_dump_to=/tmp/x --xla_backend_extra_options=foo=1,{KEY}={DEFAULT_BACKEND_OPTIONS[KEY]}"


def test_user_value_wins():
    mine = f"--xla_backend_extra_options={KEY}=7"
    assert merged_flags(mine) == mine
