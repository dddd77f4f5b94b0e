"""CDGTConfig (SPEC §2-7): the paper's defaults, validation messages, file round trips, presets, --set."""

from __future__ import annotations

import json
import math

import pytest

from cdgt_keras.config import CHOICES, PRESETS, CDGTConfig, parse_assignments

# The values SPEC §4-6 requires each categorical field to offer (CHOICES may offer more, never fewer).
SPEC_CHOICES = {
    "fusion": {"mean", "core", "max", "attention"},
    "schedule": {"cyclic", "simultaneous"},
    "rarity": {"paper", "inverse_sqrt", "inverse"},
    "correctness": {"all", "positives"},
    "payoff": {"bce", "soft_f1"},
    "disagreement": {"kl", "js", "kl_clipped"},
    "beta_schedule": {"constant", "anneal"},
    "thresholds": {"fixed", "global", "per_label"},
    "activation": {"relu"},
}

# The paper's literal method (SPEC §2, §4-6).
PAPER = {
    "n_players": 3, "overlap": 0.2, "alpha": 0.5, "beta": 0.2, "fusion": "mean", "schedule": "cyclic",
    "rarity": "paper", "correctness": "all", "payoff": "bce", "disagreement": "kl", "beta_schedule": "constant",
}


def test_defaults_are_the_papers():
    cfg = CDGTConfig()
    for name, value in PAPER.items():
        assert getattr(cfg, name) == value, name
    assert cfg.tail_fraction == 0.2 and cfg.head_fraction == 0.2
    assert cfg.core_weight == 0.75 and cfg.min_threshold_positives == 5
    assert cfg.disagreement_cap == pytest.approx(math.log(2.0))


@pytest.mark.parametrize("name", sorted(SPEC_CHOICES))
def test_categorical_field_rejects_bad_value(name):
    assert SPEC_CHOICES[name] <= set(CHOICES[name])
    with pytest.raises(ValueError) as err:
        CDGTConfig(**{name: "bogus"})
    message = str(err.value)
    assert name in message and "bogus" in message
    for allowed in CHOICES[name]:
        assert repr(allowed) in message  # the message lists every allowed value


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"n_players": 0}, "n_players"),
        ({"overlap": 1.0}, "overlap"),
        ({"overlap": -0.1}, "overlap"),
        ({"alpha": -0.5}, "alpha"),
        ({"beta": -1.0}, "beta"),
        ({"core_weight": 0.0}, "core_weight"),
        ({"dropout": 1.0}, "dropout"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"batch_size": 0}, "batch_size"),
        ({"rarity_clip": 0.5}, "rarity_clip"),
        ({"disagreement_cap": 0.0}, "disagreement_cap"),
        ({"tail_fraction": 0.0}, "tail_fraction"),
        ({"threshold_shared_positives": -1}, "threshold_shared_positives"),
        ({"text_prefixes": -1}, "text_prefixes"),
        ({"head_fraction": 0.7, "tail_fraction": 0.4}, "head_fraction + tail_fraction"),
        ({"head_hidden": (0,)}, "head_hidden"),
        ({"n_players": 3, "player_learning_rates": (0.1, 0.2)}, "player_learning_rates"),  # 2 rates, 3 players
    ],
)
def test_numeric_range_errors_name_the_field(changes, field):
    with pytest.raises(ValueError, match=field.replace("+", r"\+")):
        CDGTConfig(**changes)


def test_non_integer_n_players_is_rejected():
    with pytest.raises(ValueError, match="n_players"):
        CDGTConfig.from_dict({"n_players": 2.5})


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_save_load_round_trip(tmp_path, suffix):
    cfg = CDGTConfig(n_players=4, alpha=0.3, head_hidden=(128, 64), player_learning_rates=(1e-3, 2e-3, 3e-3, 4e-4),
                     shared_encoder=False, fusion="attention", disagreement_cap=0.5)
    path = tmp_path / f"cfg{suffix}"
    cfg.save(path)
    loaded = CDGTConfig.load(path)
    assert loaded == cfg
    assert loaded.head_hidden == (128, 64) and loaded.player_learning_rates == (1e-3, 2e-3, 3e-3, 4e-4)
    if suffix == ".json":
        assert json.loads(path.read_text())["head_hidden"] == [128, 64]


def test_preset_survives_a_round_trip(tmp_path):
    cfg = CDGTConfig.preset("rarity_bce", seed=7)
    cfg.save(tmp_path / "c.json")
    loaded = CDGTConfig.load(tmp_path / "c.json")
    assert loaded == cfg and loaded.preset_name == "rarity_bce" and loaded.seed == 7


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("bad.yaml", "alpha: [1, 2\n", ["bad.yaml", "YAML"]),
        ("bad.json", "{alpha: 0.3", ["bad.json", "JSON"]),
        ("list.yaml", "- alpha\n- beta\n", ["list.yaml", "mapping"]),
        ("unknown.yaml", "alpha: 0.3\nalpah: 0.4\n", ["unknown.yaml", "alpah"]),
        ("range.json", '{"overlap": 1.5}', ["range.json", "overlap"]),
        ("choice.yaml", "fusion: sum\n", ["choice.yaml", "fusion", "'mean'"]),
    ],
)
def test_load_errors_name_the_file(tmp_path, name, text, words):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        CDGTConfig.load(path)
    for word in words:
        assert word in str(err.value)


def test_empty_yaml_gives_the_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert CDGTConfig.load(path) == CDGTConfig()


def test_preset_paper_is_the_literal_method():
    cfg = CDGTConfig.preset("paper")
    for name, value in PAPER.items():
        assert getattr(cfg, name) == value, name
    assert cfg.preset_name == "paper"


def test_preset_with_overrides():
    cfg = CDGTConfig.preset("paper", alpha=0.3, disagreement="js")
    assert (cfg.alpha, cfg.disagreement, cfg.beta, cfg.n_players) == (0.3, "js", 0.2, 3)
    base = CDGTConfig.preset("rarity_bce")  # SPEC §5a: N=1, weights ∝ freq^-1/2, no game
    assert (base.n_players, base.alpha, base.payoff, base.rarity) == (1, 0.0, "weighted_bce", "inverse_sqrt")
    assert CDGTConfig.preset("rarity_bce", n_players=2).n_players == 2
    assert CDGTConfig.from_dict({"preset": "no_curiosity", "beta": 0.1}).alpha == 0.0


def test_default_preset_is_the_shipped_recommendation():
    from cdgt_keras.config import DEFAULT_PRESET

    assert DEFAULT_PRESET in PRESETS
    cfg = CDGTConfig.preset("recommended")  # bench/REPORT.md, "The learner"
    assert (cfg.n_players, cfg.alpha, cfg.beta, cfg.correctness, cfg.rarity, cfg.payoff, cfg.learning_rate) == (
        3, 2.0, 0.0, "log_positives", "inverse_sqrt", "bce", 0.006)
    assert (cfg.encoder_hidden, cfg.head_hidden, cfg.dropout, cfg.lr_schedule, cfg.early_stopping_metric) == (
        (512,), (), 0.5, "cosine", "p_at_5")
    assert (cfg.warmup_fraction, cfg.averaging_fraction) == (0.05, 0.0)  # a 5 % warm-up; no weight averaging
    assert (cfg.prior_bias, cfg.logit_adjustment, cfg.wide) == (True, 0.0, "none")
    assert (cfg.thresholds, cfg.threshold_prior) == ("shrunk", 10.0)
    # Adam's epsilon per label: 1e-7 exactly at debtags' 598 labels (its measured model kept to the bit), smaller
    # where there are more labels (deps: 18,632)
    assert (cfg.adam_epsilon, cfg.adam_epsilon_per_label) == (5.98e-5, True)
    assert cfg.optimizer_epsilon(598) == 1e-7 and cfg.optimizer_epsilon(18_632) < 1e-8
    # ten epochs, twelve at deps' 18,632 labels (label_epoch_growth); the paper's budget at any label count
    from cdgt_keras.learning import training_epochs

    assert (cfg.epochs, cfg.label_epoch_growth, CDGTConfig().label_epoch_growth) == (10, 0.1, 0.0)
    assert [training_epochs(cfg, n) for n in (598, 983, 18_632, 41_405)] == [10, 10, 12, 13]
    assert training_epochs(CDGTConfig(), 41_405) == CDGTConfig().epochs
    with pytest.raises(ValueError, match="label_epoch_growth"):
        CDGTConfig(label_epoch_growth=-0.1)
    # the input-space memories read at most 5,000 entries per word of a query (the paper's defaults keep all)
    assert (cfg.memory_list_cap, CDGTConfig().memory_list_cap) == (5000, 0)
    # the paper preset and the dataclass defaults are untouched by it (SPEC §4's per-label rule)
    assert CDGTConfig.preset("paper") == CDGTConfig() and CDGTConfig().thresholds == "per_label"


def test_the_text_preset_is_the_shipped_one_with_the_embedding_profile():
    """`recommended_text` is `recommended` with exactly the measured text profile on top (bench/learner_notes.md,
    rounds 55-59; the smaller encoder and one-pass epochs, round 66), and an error, not a silent model without its
    columns, on features that are not text."""
    from cdgt_keras.presets import TEXT_PRESET

    text, base = CDGTConfig.preset(TEXT_PRESET), CDGTConfig.preset("recommended")
    changed = {k: v for k, v in text.to_dict().items() if v != base.to_dict()[k] and k != "preset_name"}
    assert changed == {"alpha": 1.0, "logit_adjustment": 2.0, "logit_adjustment_prior": "propensity",
                       "rerank_slack": 0.003, "tail_decisions": "own", "text_embedding": "all-MiniLM-L6-v2",
                       "text_embedding_lead_tokens": 32, "wide": "all", "wide_input": "embedding",
                       "wide_learning_rate": 0.02, "encoder_hidden": [384], "min_steps_per_epoch": 0}
    from cdgt_keras.learning import wide_columns

    assert wide_columns(text, 768) == 768  # the embedding's two blocks of 384
    with pytest.raises(ValueError, match="no text embedding columns"):
        wide_columns(text, 0)  # sparse or dense features given as they are



def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="nope") as err:
        CDGTConfig.preset("nope")
    assert "paper" in str(err.value) and "rarity_bce" in str(err.value)
    with pytest.raises(ValueError, match="nope"):
        CDGTConfig.from_dict({"preset": "nope"})


def test_with_overrides_types():
    cfg = CDGTConfig().with_overrides(
        ["alpha=0.3", "head_hidden=128,64", "shared_encoder=false", "n_players=4", "fusion=core",
         "player_learning_rates=0.1, 0.2,0.3,0.4", "encoder_hidden="])
    assert cfg.alpha == 0.3 and isinstance(cfg.alpha, float)
    assert cfg.head_hidden == (128, 64)
    assert cfg.shared_encoder is False
    assert cfg.n_players == 4 and isinstance(cfg.n_players, int)
    assert cfg.fusion == "core"
    assert cfg.player_learning_rates == (0.1, 0.2, 0.3, 0.4)
    assert cfg.encoder_hidden == ()  # encoded features: no encoder layers
    assert CDGTConfig().with_overrides(["shared_encoder=YES"]).shared_encoder is True
    assert parse_assignments([" beta = 0.05 "]) == {"beta": 0.05}


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("alpha", ["alpha", "key=value"]),
        ("=0.3", ["key=value"]),
        ("alpah=0.3", ["alpah", "unknown"]),
        ("n_players=three", ["n_players", "int"]),
        ("batch_size=1.5", ["batch_size", "int"]),
        ("dropout=lots", ["dropout", "float"]),
        ("shared_encoder=maybe", ["shared_encoder", "bool"]),
        ("overlap=1.0", ["overlap"]),
    ],
)
def test_set_errors(item, words):
    with pytest.raises(ValueError) as err:
        CDGTConfig().with_overrides([item])
    for word in words:
        assert word in str(err.value)


def test_set_bad_tuple_item_names_the_field():
    with pytest.raises(ValueError, match="head_hidden"):
        CDGTConfig().with_overrides(["head_hidden=128,x"])


def test_player_learning_rate():
    shared = CDGTConfig(learning_rate=0.01)
    assert [shared.player_learning_rate(i) for i in range(3)] == [0.01, 0.01, 0.01]
    own = CDGTConfig(n_players=2, player_learning_rates="0.1,0.2")
    assert (own.player_learning_rate(0), own.player_learning_rate(1)) == (0.1, 0.2)
    with pytest.raises(IndexError):
        own.player_learning_rate(2)


def test_replace_validates():
    with pytest.raises(ValueError, match="alpha"):
        CDGTConfig().replace(alpha=-1.0)
    assert CDGTConfig().replace(alpha=0.1).alpha == 0.1


def test_the_memories_tuning_metric_is_checked():
    assert CDGTConfig().memory_tuning_metric == "p_at_k"
    assert CDGTConfig(memory_tuning_metric="psp_at_k").memory_tuning_metric == "psp_at_k"
    assert CDGTConfig(memory_tuning_metric="p_then_psp_at_k").memory_tuning_slack == 0.001
    with pytest.raises(ValueError, match="memory_tuning_slack"):
        CDGTConfig(memory_tuning_slack=-0.1)
    with pytest.raises(ValueError, match="memory_tuning_metric"):
        CDGTConfig(memory_tuning_metric="psp")
