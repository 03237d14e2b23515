"""Config: presets, derived sizes, validation messages, (de)serialisation."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from rlperf.config import (
    LEFT_OUT,
    PRESETS,
    Config,
    ConfigError,
    field_index,
    parse_env_options,
    preset,
    set_field,
)


def with_field(section: str, name: str, value) -> Config:
    cfg = Config()
    set_field(cfg, section, name, value)
    return cfg


def test_default_preset_is_the_default_config_and_valid() -> None:
    assert "default" in PRESETS
    assert preset("default") == Config()
    for name in PRESETS:
        preset(name).validate()
    assert preset("default") is not preset("default"), "a fresh config each time"


def test_robots_preset_is_the_measured_symbolic_cnn_config() -> None:
    cfg = preset("robots")
    assert (cfg.env.env, cfg.env.options) == ("robots", {"obs_mode": "symbolic"})
    assert (cfg.policy.kind, cfg.policy.cnn_channels, cfg.policy.cnn_features) == (
        "cnn",
        (32, 32),
        128,
    )
    assert (cfg.ppo.learning_rate, cfg.run.total_steps) == (2e-3, 5_000_000)


def test_robots_rgb_preset_is_the_measured_convlstm_config() -> None:
    cfg = preset("robots-rgb")
    assert (cfg.env.env, cfg.env.options, cfg.env.num_envs) == ("robots", {}, 64)
    policy = cfg.policy
    assert (policy.kind, policy.convlstm_head, policy.convlstm_channels) == (
        "convlstm",
        "flatten",
        32,
    )
    assert (policy.convlstm_layers, policy.convlstm_ticks) == (1, 1)
    assert (cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.learning_rate) == (16, 4, 5e-4)
    assert cfg.run.total_steps == 1_000_000


def test_unknown_preset_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'fastest'.*default"):
        preset("fastest")


def test_defaults_are_cleanrl_ppo_shapes() -> None:
    cfg = Config()
    assert cfg.env.env == "cartpole"
    assert cfg.policy.hidden_sizes == (64, 64)
    assert (cfg.ppo.num_minibatches, cfg.ppo.update_epochs) == (4, 4)
    assert cfg.ppo.clip_vloss and cfg.ppo.norm_adv and cfg.ppo.anneal_lr


def test_derived_sizes_are_properties() -> None:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches = 16, 8, 4
    cfg.run.total_steps = 1000
    assert (cfg.batch_size, cfg.minibatch_size, cfg.num_iterations) == (128, 32, 7)
    stored = json.dumps(cfg.to_dict())
    for derived in ("batch_size", "minibatch_size", "num_iterations"):
        assert f'"{derived}"' not in stored


BAD_VALUES = [
    ("env", "num_envs", 0, "num_envs must be positive"),
    ("env", "num_envs", -4, "num_envs must be positive"),
    ("ppo", "num_steps", 0, "num_steps must be positive"),
    ("ppo", "num_minibatches", 0, "num_minibatches must be positive"),
    ("ppo", "update_epochs", 0, "update_epochs must be positive"),
    ("run", "total_steps", 0, "total_steps must be positive"),
    ("ppo", "learning_rate", 0.0, "learning_rate must be positive"),
    ("ppo", "learning_rate", -1e-3, "learning_rate must be positive"),
    ("run", "sps_window_s", 0.0, "sps_window_s must be positive"),
    ("run", "threads", -1, "threads must be >= 0"),
    ("run", "checkpoint_every", -1, "checkpoint_every must be >= 0"),
    ("run", "warmup_iters", -1, "warmup_iters must be >= 0"),
    ("ppo", "ent_coef", -0.1, "ent_coef must be >= 0"),
    ("ppo", "vf_coef", -0.1, "vf_coef must be >= 0"),
    ("ppo", "max_grad_norm", -0.5, "max_grad_norm must be >= 0"),
    ("ppo", "clip_coef", -0.2, "clip_coef must be >= 0"),
    ("ppo", "gamma", 1.5, r"gamma must be in \[0, 1\]"),
    ("ppo", "gae_lambda", -0.1, r"gae_lambda must be in \[0, 1\]"),
    ("policy", "hidden_sizes", (), "hidden_sizes must be positive"),
    ("policy", "hidden_sizes", (64, 0), "hidden_sizes must be positive"),
    ("run", "device", "tpu", "device must be cpu or cuda"),
    ("ppo", "num_minibatches", 3, "divisible by num_minibatches 3"),
    ("run", "total_steps", 100, "less than one rollout"),
]


@pytest.mark.parametrize(
    "section, name, value, message", BAD_VALUES, ids=[f"{b[1]}={b[2]}" for b in BAD_VALUES]
)
def test_bad_values_give_one_line_naming_the_field(section, name, value, message) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        with_field(section, name, value).validate()
    assert "\n" not in str(err.value)


def test_batch_divisibility_message_shows_the_arithmetic() -> None:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches = 6, 5, 4
    with pytest.raises(ConfigError, match=r"6\*5 = 30 must be divisible by num_minibatches 4"):
        cfg.validate()


def test_minibatch_of_one_cannot_normalise_advantages() -> None:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches = 2, 2, 4
    cfg.run.total_steps = 4
    with pytest.raises(ConfigError, match="too small to normalise"):
        cfg.validate()
    cfg.ppo.norm_adv = False
    cfg.validate()


FLOAT_FIELDS = [
    pytest.param(section, name, id=name)
    for name, (section, f) in field_index().items()
    if isinstance(getattr(getattr(Config(), section), name), float)
]


@pytest.mark.parametrize("section, name", FLOAT_FIELDS)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_rejected_for_every_float_setting(
    section: str, name: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be a finite number"):
        with_field(section, name, value).validate()


def test_non_positive_adam_eps_is_rejected() -> None:
    for value in (-1.0, 0.0):
        with pytest.raises(ConfigError, match="adam_eps must be positive"):
            with_field("ppo", "adam_eps", value).validate()


def test_valid_edge_values_pass() -> None:
    for section, name, value in [
        ("ppo", "gamma", 0.0),
        ("ppo", "gamma", 1.0),
        ("ppo", "gae_lambda", 1.0),
        ("ppo", "ent_coef", 0.0),
        ("ppo", "max_grad_norm", 0.0),
        ("run", "threads", 0),
        ("run", "checkpoint_every", 0),
        ("run", "warmup_iters", 0),
        ("run", "device", "cuda:1"),
        ("policy", "hidden_sizes", (8, 16, 4)),
    ]:
        with_field(section, name, value).validate()


def non_default_config() -> Config:
    cfg = Config()
    cfg.env.num_envs = 16
    cfg.policy.hidden_sizes = (32, 16, 8)
    cfg.policy.analytic = False
    cfg.ppo.learning_rate = 1e-4
    cfg.ppo.clip_vloss = False
    cfg.run.seed = 42
    cfg.run.run_dir = "/tmp/somewhere"
    return cfg


def test_to_dict_from_dict_round_trip_through_json() -> None:
    cfg = non_default_config()
    data = json.loads(json.dumps(cfg.to_dict()))
    assert set(data) == {"env", "policy", "ppo", "teacher", "run"}
    back = Config.from_dict(data)
    assert back == cfg
    assert isinstance(back.policy.hidden_sizes, tuple)
    assert Config.from_dict({}) == Config()
    assert Config.from_dict({"ppo": {"gamma": 0.9}}).ppo.gamma == 0.9


def test_a_run_written_before_the_analytic_rename_still_loads() -> None:
    # Its config.json says fast_update: the field is analytic now.
    assert Config.from_dict({"policy": {"fast_update": False}}).policy.analytic is False


def test_from_dict_rejects_unknown_sections_and_fields() -> None:
    with pytest.raises(ConfigError, match="unknown config section 'optim'"):
        Config.from_dict({"optim": {"lr": 1}})
    with pytest.raises(ConfigError, match=r"unknown config field ppo\.lr"):
        Config.from_dict({"ppo": {"lr": 1}})
    with pytest.raises(ConfigError, match=r"unknown config field env\.seed"):
        set_field(Config(), "env", "seed", 1)


def test_field_index_is_flat_complete_and_documented() -> None:
    index = field_index()
    expected = {
        f.name
        for section in dataclasses.fields(Config)
        for f in dataclasses.fields(getattr(Config(), section.name))
    }
    assert set(index) == expected
    assert len(index) == sum(len(dataclasses.fields(getattr(Config(), s.name)))
                             for s in dataclasses.fields(Config)), "one flag per field"  # fmt: skip
    for name, (section, f) in index.items():
        assert hasattr(getattr(Config(), section), name)
        assert f.metadata.get("help"), f"{name} has help text"


def test_a_field_name_in_two_sections_fails_loudly() -> None:
    @dataclasses.dataclass
    class First:
        seed: int = 1

    @dataclasses.dataclass
    class Second:
        seed: int = 2

    @dataclasses.dataclass
    class Clashing:
        first: First = dataclasses.field(default_factory=First)
        second: Second = dataclasses.field(default_factory=Second)

    with pytest.raises(RuntimeError, match="'seed' is in both first and second"):
        field_index(Clashing)


@pytest.mark.parametrize(
    "items, expected",
    [
        (["observe=position"], {"observe": "position"}),
        (
            ["n=3", "x=0.5", "flag=true", "off=False"],
            {"n": 3, "x": 0.5, "flag": True, "off": False},
        ),
        (["path=a=b"], {"path": "a=b"}),
        (["n=1", "n=2"], {"n": 2}),
    ],
)
def test_env_options_parse_into_typed_values(items, expected) -> None:
    assert parse_env_options(items) == expected
    cfg = Config()
    set_field(cfg, "env", "options", items)
    assert cfg.env.options == expected


@pytest.mark.parametrize("item", ["observe", "=3", ""])
def test_malformed_env_options_are_one_line_errors(item: str) -> None:
    with pytest.raises(ConfigError, match="--env-option takes KEY=VALUE"):
        parse_env_options([item])


def test_original_and_ultra_fast_are_the_guides_columns_scaled_as_documented() -> None:
    """The values the presets' docstrings and docs/ablation.md state: batch sizes 1/8 of the
    guide's, envs 1/2, BPTT horizons and epochs as the guide's; the LSTM on the grid."""
    original, ultra = preset("original"), preset("ultra_fast")
    for cfg in (original, ultra):
        assert (cfg.env.env, cfg.policy.kind, cfg.policy.cnn_channels) == ("grid", "lstm", (16,))
        assert cfg.ppo.update_epochs == 1 and cfg.teacher.supervised_steps == 0
        assert not cfg.ppo.compile and cfg.ppo.precision == "fp32"
    agents = 16  # extractor_hub_30's agents per map: the rows of the batch are agents
    sizes = {}
    for name, cfg in (("original", original), ("ultra_fast", ultra)):
        rows = cfg.env.num_envs * agents
        batch = rows * cfg.ppo.num_steps
        sizes[name] = (rows, batch, batch // cfg.ppo.num_minibatches, cfg.ppo.bptt_horizon)
    assert sizes["original"] == (64 // 2, 16_384 // 8, 512 // 8, 64)
    assert sizes["ultra_fast"] == (512 // 2, 262_144 // 8, 32_768 // 8, 32)
    assert LEFT_OUT["ultra_fast"] == {
        "compile": {"compile": True},
        "precision": {"precision": "bf16"},
        "workers": {"backend": "multiprocess", "num_workers": 2, "env_batch_size": 1},
    }
    # Each left-out knob runs on the base preset: the ablation measures it alone.
    for settings in LEFT_OUT["ultra_fast"].values():
        cfg = preset("original")
        for key, value in settings.items():
            section = "env" if hasattr(cfg.env, key) else "ppo"
            setattr(getattr(cfg, section), key, value)
        cfg.validate()
