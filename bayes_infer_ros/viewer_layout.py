"""A PlotJuggler layout for a model's belief topics (plain XML text, no ROS needed).

Tab ``beliefs``: one plot per factor with the probability of every state (``/beliefs/<factor>/probabilities[k]``,
labelled in the legend by PlotJuggler's series names). Tab ``summary``: each factor's most likely state index
and entropy. The ROS 2 topic subscriber plugin is preselected on ``beliefs/<factor>`` and uses the header stamps
(sim time when the node runs on it). ``config/plotjuggler_beliefs.xml`` is this layout for config/agent.yaml.
"""
from __future__ import annotations

from typing import Sequence
from xml.sax.saxutils import quoteattr

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def belief_topic(namespace: str, factor: str) -> str:
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    return f"{ns}/beliefs/{factor}"


def _plot(curves: Sequence[str], y_range: tuple[float, float] | None) -> list[str]:
    lines = ['      <plot style="Lines" mode="TimeSeries" flip_x="false" flip_y="false">']
    if y_range is not None:
        lines.append(f'       <limitY min="{y_range[0]:g}" max="{y_range[1]:g}"/>')
    for k, name in enumerate(curves):
        lines.append(f'       <curve name={quoteattr(name)} color="{COLORS[k % len(COLORS)]}"/>')
    lines.append("      </plot>")
    return lines


def _splitter(areas: Sequence[tuple[str, list[str]]]) -> list[str]:
    size = ";".join(f"{1 / len(areas):.6f}" for _ in areas)
    lines = [f'    <DockSplitter orientation="-" sizes="{size}" count="{len(areas)}">']
    for title, plot in areas:
        lines.append(f"     <DockArea name={quoteattr(title)}>")
        lines += plot
        lines.append("     </DockArea>")
    lines.append("    </DockSplitter>")
    return lines


def plotjuggler_layout(factor_names: Sequence[str], num_states: Sequence[int], namespace: str = "") -> str:
    """The layout XML for these factors (topics under ``namespace``)."""
    topics = [belief_topic(namespace, f) for f in factor_names]
    beliefs = [(f"{name}: p(state)", _plot([f"{t}/probabilities[{k}]" for k in range(n)], (0.0, 1.0)))
               for name, t, n in zip(factor_names, topics, num_states)]
    summary = [("most likely state (index)", _plot([f"{t}/most_likely_index" for t in topics], None)),
               ("entropy (nats)", _plot([f"{t}/entropy" for t in topics], None))]
    lines = ["<?xml version='1.0' encoding='UTF-8'?>", "<root>",
             ' <tabbed_widget parent="main_window" name="Main Window">']
    for tab, areas in (("beliefs", beliefs), ("summary", summary)):
        lines += [f'  <Tab tab_name="{tab}" containers="1">', "   <Container>"]
        lines += _splitter(areas)
        lines += ["   </Container>", "  </Tab>"]
    lines += ['  <currentTabIndex index="0"/>', " </tabbed_widget>", ' <use_relative_time_offset enabled="1"/>',
              " <Plugins>", '  <plugin ID="ROS2 Topic Subscriber">', '   <use_header_stamp value="true"/>',
              '   <discard_large_arrays value="true"/>', '   <max_array_size value="100"/>', "   <selected_topics>"]
    lines += [f"    <topic name={quoteattr(t)}/>" for t in topics]
    lines += ["   </selected_topics>", "  </plugin>", " </Plugins>", " <previouslyLoaded_Datafiles/>",
              " <customMathEquations/>", " <snippets/>", "</root>", ""]
    return "\n".join(lines)
