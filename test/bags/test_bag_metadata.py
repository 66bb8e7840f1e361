"""Bag metadata as Humble's, Jazzy's and Kilted's rosbag2 read it (no ROS needed).

Each reader below transcribes the decoder of that distro's rosbag2 (yaml-cpp conversions of ``metadata.yaml``):

- Humble: ``rosbag2_storage/src/rosbag2_storage/metadata_io.cpp`` (branch humble; metadata version 5). It reads
  any version number and ignores fields it does not know, but takes ``offered_qos_profiles`` as a string from
  version 4 on; the player parses a non-empty string as a YAML list of QoS maps with integer policies.
- Jazzy: ``rosbag2_storage/include/rosbag2_storage/yaml.hpp`` (branch jazzy; version 9): the string form for
  versions 4..8, a YAML list from version 9; ``custom_data`` (map of strings) from 6, ``type_description_hash``
  from 7, ``ros_distro`` from 8.
- Kilted: the same decoder as Jazzy's (rolling's, version 9, read before Kilted branched off).

yaml-cpp semantics kept here: ``as<std::string>`` accepts any scalar and refuses null, lists and maps;
``as<uint64_t>``/``as<int>`` need an integer scalar. The nodes come from ``yaml.compose`` so that a quoted
``''`` (a scalar) and an empty value (null) stay apart, as they do in yaml-cpp.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer

from bayes_infer_ros.bags import simulate, write_episode_bag
from bayes_infer_ros.bags.bagio import METADATA_VERSION
from bayes_infer_ros.model import load_model

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_BAGS = sorted(p.parent for p in (REPO_ROOT / "bags").glob("*/metadata.yaml"))


class BadConversion(Exception):
    """What yaml-cpp throws (YAML::TypedBadConversion / InvalidNode); rosbag2 does not catch it."""


def _null(node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _get(node, key: str, where: str):
    if not isinstance(node, yaml.MappingNode):
        raise BadConversion(f"{where}: not a map")
    for k, v in node.value:
        if k.value == key:
            return v
    raise BadConversion(f"{where}.{key}: missing")


def as_string(node, where: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or _null(node):
        raise BadConversion(f"{where}: {type(node).__name__} is not a string scalar")
    return node.value


def as_uint(node, where: str) -> int:
    text = as_string(node, where)
    if not re.fullmatch(r"\+?[0-9]+", text):
        raise BadConversion(f"{where}: {text!r} is not an unsigned integer")
    return int(text)


def as_int(node, where: str) -> int:
    text = as_string(node, where)
    if not re.fullmatch(r"[-+]?[0-9]+", text):
        raise BadConversion(f"{where}: {text!r} is not an integer")
    return int(text)


def as_list(node, where: str) -> list:
    if not isinstance(node, yaml.SequenceNode):
        raise BadConversion(f"{where}: not a list")
    return node.value


def as_string_map(node, where: str) -> dict:
    if _null(node):
        return {}  # yaml-cpp iterates a null node as empty
    if not isinstance(node, yaml.MappingNode):
        raise BadConversion(f"{where}: not a map")
    return {as_string(k, where): as_string(v, f"{where}.{k.value}") for k, v in node.value}


def qos_list_from_string(text: str, where: str) -> list:
    """Humble's player / Jazzy's to_rclcpp_qos_vector on the string form (empty: no offers, default QoS)."""
    if text == "":
        return []
    node = yaml.compose(text)
    out = []
    for i, q in enumerate(as_list(node, where)):
        out.append({k: as_int(_get(q, k, f"{where}[{i}]"), f"{where}[{i}].{k}")
                    for k in ("history", "depth", "reliability", "durability", "liveliness")})
    return out


def read_humble(doc) -> dict:
    info = _get(doc, "rosbag2_bagfile_information", "")
    version = as_int(_get(info, "version", "info"), "version")
    out = {"version": version, "storage_identifier": as_string(_get(info, "storage_identifier", "info"), "storage"),
           "duration": as_uint(_get(_get(info, "duration", "info"), "nanoseconds", "duration"), "duration"),
           "start": as_uint(_get(_get(info, "starting_time", "info"), "nanoseconds_since_epoch", "starting_time"),
                            "starting_time"),
           "message_count": as_uint(_get(info, "message_count", "info"), "message_count"), "topics": {}}
    for i, t in enumerate(as_list(_get(info, "topics_with_message_count", "info"), "topics")):
        where = f"topics[{i}]"
        meta = _get(t, "topic_metadata", where)
        name = as_string(_get(meta, "name", where), f"{where}.name")
        qos = as_string(_get(meta, "offered_qos_profiles", where), f"{where}.offered_qos_profiles") \
            if version >= 4 else ""
        out["topics"][name] = {"type": as_string(_get(meta, "type", where), f"{where}.type"),
                               "format": as_string(_get(meta, "serialization_format", where), f"{where}.format"),
                               "qos": qos_list_from_string(qos, f"{where}.offered_qos_profiles"),
                               "count": as_uint(_get(t, "message_count", where), f"{where}.message_count")}
    out["files"] = [as_string(p, "relative_file_paths") for p in as_list(_get(info, "relative_file_paths", "info"),
                                                                          "relative_file_paths")]
    if version >= 3:
        as_string(_get(info, "compression_format", "info"), "compression_format")
        as_string(_get(info, "compression_mode", "info"), "compression_mode")
    if version >= 5:
        for i, f in enumerate(as_list(_get(info, "files", "info"), "files")):
            as_string(_get(f, "path", f"files[{i}]"), f"files[{i}].path")
            as_uint(_get(_get(f, "duration", f"files[{i}]"), "nanoseconds", "files"), "files.duration")
            as_uint(_get(f, "message_count", f"files[{i}]"), f"files[{i}].message_count")
    return out


def read_jazzy(doc) -> dict:
    info = _get(doc, "rosbag2_bagfile_information", "")
    version = as_int(_get(info, "version", "info"), "version")
    out = {
        "version": version, "storage_identifier": as_string(_get(info, "storage_identifier", "info"), "storage"),
        "message_count": as_uint(_get(info, "message_count", "info"), "message_count"), "topics": {}}
    for i, t in enumerate(as_list(_get(info, "topics_with_message_count", "info"), "topics")):
        where = f"topics[{i}]"
        meta = _get(t, "topic_metadata", where)
        name = as_string(_get(meta, "name", where), f"{where}.name")
        qos_node = _get(meta, "offered_qos_profiles", where)
        if version >= 9:
            qos = [{k: as_string(_get(q, k, where), where) for k in ("history", "reliability", "durability")}
                   for q in as_list(qos_node, f"{where}.offered_qos_profiles")]
        elif version >= 4:
            qos = qos_list_from_string(as_string(qos_node, f"{where}.offered_qos_profiles"), where)
        else:
            qos = []
        out["topics"][name] = {
            "type": as_string(_get(meta, "type", where), f"{where}.type"), "qos": qos,
            "hash": as_string(_get(meta, "type_description_hash", where), f"{where}.hash") if version >= 7 else "",
            "count": as_uint(_get(t, "message_count", where), f"{where}.message_count")}
    if version >= 6:
        out["custom_data"] = as_string_map(_get(info, "custom_data", "info"), "custom_data")
    if version >= 8:
        out["ros_distro"] = as_string(_get(info, "ros_distro", "info"), "ros_distro")
    return out


READERS = {"humble": read_humble, "jazzy": read_jazzy, "kilted": read_jazzy}


def _compose(path: Path):
    return yaml.compose((path / "metadata.yaml").read_text())


@pytest.fixture(scope="module")
def fresh_bag(tmp_path_factory):
    model = load_model(REPO_ROOT / "config" / "agent.yaml")
    return write_episode_bag(tmp_path_factory.mktemp("bag") / "b", model, simulate(model, 5, seed=1))


def test_the_writer_uses_the_version_every_distro_reads():
    assert METADATA_VERSION == 8


@pytest.mark.parametrize("distro", sorted(READERS))
def test_a_fresh_bag_reads_on_every_distro(fresh_bag, distro):
    meta = READERS[distro](_compose(fresh_bag))
    assert meta["version"] == METADATA_VERSION and meta["storage_identifier"] == "mcap"
    assert "/clock" in meta["topics"] and all(t["count"] > 0 for t in meta["topics"].values())
    assert meta["message_count"] == sum(t["count"] for t in meta["topics"].values())
    if distro != "humble":
        assert meta["custom_data"]["num_steps"] == "5"
        assert all(t["hash"].startswith("RIHS01_") for t in meta["topics"].values())


@pytest.mark.parametrize("distro", sorted(READERS))
@pytest.mark.parametrize("bag", SAMPLE_BAGS, ids=[p.name for p in SAMPLE_BAGS])
def test_committed_sample_bags_read_on_every_distro(bag, distro):
    meta = READERS[distro](_compose(bag))
    assert meta["topics"], f"{bag.name}: no topics"
    assert meta["version"] <= 8 or distro != "humble"


def test_humble_reader_refuses_a_version_9_bag_and_newer_readers_take_it(tmp_path):
    """The emulation can fail: version 9 writes offered_qos_profiles as a list, Humble wants a string."""
    from bayes_infer_ros.bags.interfaces import CLOCK_TYPE, make_typestore

    store = make_typestore()
    with Writer(tmp_path / "v9", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/clock", CLOCK_TYPE, typestore=store)
        stamp = store.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0)
        w.write(conn, 1_000_000_000, store.serialize_cdr(store.types[CLOCK_TYPE](clock=stamp), CLOCK_TYPE))
    doc = _compose(tmp_path / "v9")
    with pytest.raises(BadConversion, match="offered_qos_profiles"):
        read_humble(doc)
    assert read_jazzy(doc)["topics"]["/clock"]["count"] == 1


def test_recorded_qos_strings_parse_as_the_players_do(tmp_path):
    """A bag with an offered QoS (version 8 string form) parses on all three; policies come back as integers."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    from bayes_infer_ros.bags.interfaces import CLOCK_TYPE, make_typestore

    store = make_typestore()
    zero = QosTime(0, 0)
    qos = Qos(QosHistory.KEEP_LAST, 10, QosReliability.BEST_EFFORT, QosDurability.VOLATILE, zero, zero,
              QosLiveliness.AUTOMATIC, zero, False)
    with Writer(tmp_path / "q", version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/clock", CLOCK_TYPE, typestore=store, offered_qos_profiles=[qos])
        stamp = store.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0)
        w.write(conn, 1, store.serialize_cdr(store.types[CLOCK_TYPE](clock=stamp), CLOCK_TYPE))
    doc = _compose(tmp_path / "q")
    for reader in READERS.values():
        (got,) = reader(doc)["topics"]["/clock"]["qos"]
        assert (got["reliability"], got["durability"], got["depth"]) == (2, 2, 10)
