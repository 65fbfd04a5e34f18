"""The run settings module: torch-free, each default once (the `verl` section's defaults live in
VerlSettings alone), unknown keys named with their config section."""

import dataclasses
import json
import subprocess
import sys

import pytest
import yaml

from vicurl.config.settings import TrainSettings, VerlSettings

from harness import REPO

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())


def test_settings_import_neither_torch_nor_verl():
    code = "import sys, vicurl.config.settings; print(json.dumps([m for m in ('torch', 'verl') if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_verl_settings_are_the_schemas_verl_section_and_hold_its_only_defaults():
    props = SCHEMA["properties"]["verl"]["properties"]
    assert [f.name for f in dataclasses.fields(VerlSettings)] == list(props)
    assert [k for k, p in props.items() if "default" in p] == []  # written once: in VerlSettings


def test_every_train_setting_of_the_schema_is_a_field():
    props = SCHEMA["definitions"]["train_settings"]["properties"]
    assert set(props) <= {f.name for f in dataclasses.fields(TrainSettings)}
    assert [k for k, p in props.items() if "default" in p] == []  # written once: in TrainSettings


def test_curricula_take_their_defaults_from_the_schema_only():
    """No curriculum class or schedule repeats a default of `curricula.<name>`: make_curriculum fills
    them from the schema (`vicurl.config.settings.schema_defaults`)."""
    import inspect

    from vicurl.config import methods
    from vicurl.config.settings import schema_defaults
    from vicurl.curriculum import linear_beta, make_curriculum

    for name, spec in methods.CURRICULA.items():
        params = inspect.signature(methods.load(spec.implementation)).parameters.values()
        assert [p.name for p in params if p.default is not inspect.Parameter.empty] == [], name
        defaults = {k: v for k, v in schema_defaults("curricula", name).items() if k != "weight_kl"}
        assert make_curriculum(name).params == defaults, name
    assert [p for p in inspect.signature(linear_beta).parameters.values()
            if p.name.startswith("beta") and p.default is not inspect.Parameter.empty] == []


def test_unknown_keys_are_named_with_their_section():
    with pytest.raises(ValueError, match=r"\['lrr'\].*config key train"):
        TrainSettings.from_dict({"total_steps": 1, "lrr": 1.0})
    with pytest.raises(ValueError, match=r"\['gpus'\].*config key verl"):
        VerlSettings.from_dict({"gpus": 2})


def test_a_settings_file_round_trips():
    s = TrainSettings(total_steps=3, adam_betas=(0.8, 0.9), reward_params={"n_votes": 4})
    again = TrainSettings.from_dict(json.loads(json.dumps(dataclasses.asdict(s))))
    assert again == s and again.adam_betas == (0.8, 0.9)
    assert TrainSettings.of(s) is s and TrainSettings.of({"total_steps": 3}) == TrainSettings(total_steps=3)
    assert TrainSettings.from_dict({"total_steps": 1, "reward_params": None}).reward_params == {}
