"""``lab.pymdp_ticker``: the speed gate's hand-written pymdp node calls once per complete step (every modality with
one stamp), with that step's levels one-hot, and times each call."""
from __future__ import annotations

import numpy as np
import pytest

from ros_harness import wait_for

pytestmark = pytest.mark.ros


def test_the_ticker_calls_once_per_complete_step_with_its_levels(probe, repo_root):
    from rclpy.qos import qos_profile_sensor_data

    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.msg import CategoricalObservation
    from lab.pymdp_ticker import PymdpTicker

    model = load_model(repo_root / "config" / "agent.yaml")
    names = [model.modality_name(m) for m in range(model.num_modalities)]
    calls = []
    with PymdpTicker(model, lambda obs: calls.append(obs) or []) as ticker:
        pubs = [probe.publisher(f"/observations/{n}", CategoricalObservation, qos_profile_sensor_data) for n in names]
        assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs), 20)

        def publish(stamp_s, levels):
            for pub, level in zip(pubs, levels):
                msg = CategoricalObservation(level=level)
                msg.header.stamp.sec = stamp_s
                pub.publish(msg)

        levels = [n - 1 for n in model.num_obs]
        assert levels[0] > 0
        # best effort: a step is sent again until its call is seen (each resend completes a new stamp)
        for stamp_s in range(1, 20):
            publish(stamp_s, levels)
            if wait_for(lambda: calls, 0.5):
                break
        assert len(calls) >= 1 and len(ticker.times_s) == len(calls)
        for o, n, level in zip(calls[0], model.num_obs, levels):
            np.testing.assert_array_equal(o, np.eye(n, dtype=np.float32)[level])
        # one modality short, its levels 0 (a complete step above has n - 1): never a call with them
        publish(100, [0] * (len(pubs) - 1))
        assert not wait_for(lambda: any(int(np.argmax(obs[0])) == 0 for obs in calls), 1.0)
