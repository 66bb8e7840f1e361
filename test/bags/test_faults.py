"""Sensor faults in a simulated episode (``bayes-infer make-bag --fault``): the readings they replace, the schedule a
bag records, and a fault bag that regenerates bit for bit."""
import json

import numpy as np
import pytest

from bayes_infer_ros.bags import read_episode
from bayes_infer_ros.bags.bagio import bag_content_digest
from bayes_infer_ros.bags.faults import DEFAULT_FAULTS, FAULTS_KEY, SensorFault, fault_mask, inject
from bayes_infer_ros.bags.make_bag import SAMPLE_DT_S, SAMPLE_SEED, SAMPLE_STEPS, make_sample_bag
from bayes_infer_ros.bags.simulate import simulate
from bayes_infer_ros.cli.make_bag import main as make_bag_main
from bayes_infer_ros.model import load_model


@pytest.fixture(scope="module")
def model(repo_root):
    return load_model(repo_root / "config" / "agent.yaml")


def test_faults_replace_readings_only_on_their_stretch(model):
    clean = simulate(model, SAMPLE_STEPS, SAMPLE_SEED)
    faulty, schedule = inject(model, clean, DEFAULT_FAULTS, SAMPLE_DT_S, SAMPLE_SEED)
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    mask = fault_mask({FAULTS_KEY: json.dumps(schedule)}, SAMPLE_STEPS, names)
    # the lidar sector stuck at 'gap' from 6 s for 5 s; the battery driver's two readings random from 11 s for 5 s
    lidar, voltage, charging = names.index("lidar_gap"), names.index("voltage"), names.index("charging")
    assert np.flatnonzero(mask[:, lidar]).tolist() == list(range(60, 110))
    assert np.flatnonzero(mask[:, voltage]).tolist() == np.flatnonzero(mask[:, charging]).tolist() == list(range(110, 160))
    assert not mask[:, names.index("rfid_tag")].any()
    np.testing.assert_array_equal(faulty.states, clean.states)
    np.testing.assert_array_equal(faulty.actions, clean.actions)
    np.testing.assert_array_equal(faulty.observations[~mask], clean.observations[~mask])
    assert (faulty.observations[60:110, lidar] == model.observation_labels[lidar].index("gap")).all()
    random = faulty.observations[110:160, voltage]
    assert set(random.tolist()) == {0, 1, 2}  # uniform over the three levels: each one shows in 50 draws
    assert (random != clean.observations[110:160, voltage]).any()


def test_a_fault_naming_nothing_of_the_model_is_refused(model):
    clean = simulate(model, 20, 0)
    for fault, match in ((SensorFault("sonar", "stuck", 0.0, 1.0), "'sonar' is not a modality"),
                         (SensorFault("voltage", "drift", 0.0, 1.0), "kind 'drift' is not one of"),
                         (SensorFault("voltage", "stuck", 0.0, 1.0, "empty"), "'empty' is not a level of voltage"),
                         (SensorFault("voltage", "stuck", 0.0, 1.0, "7"), "7 is out of range for voltage")):
        with pytest.raises(ValueError, match=match):
            inject(model, clean, [fault], 0.1, 0)


def test_fault_bag_records_its_schedule_and_regenerates_bit_for_bit(tmp_path, repo_root, capsys):
    first = tmp_path / "fault"
    assert make_bag_main([str(first), "--fault"]) == 0
    assert "wrote" in capsys.readouterr().out
    again = make_sample_bag(tmp_path / "again", repo_root / "config" / "agent.yaml", faults=DEFAULT_FAULTS)
    assert bag_content_digest(first) == bag_content_digest(again)
    episode = read_episode(first)
    mask = fault_mask(episode.custom_data, episode.num_steps, episode.modality_names)
    assert mask.sum() == 150
    clean = read_episode(repo_root / "bags" / "agent_sample")  # the same seed: the same episode, faults apart
    np.testing.assert_array_equal(episode.states, clean.states)
    np.testing.assert_array_equal(episode.observations[~mask], clean.observations[~mask])
    assert fault_mask(clean.custom_data, clean.num_steps, clean.modality_names).sum() == 0
