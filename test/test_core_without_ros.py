"""The inference core imports and runs with rclpy unavailable (and never imports it)."""
import subprocess
import sys
import textwrap


def test_core_never_imports_rclpy(repo_root):
    code = textwrap.dedent("""
        import sys
        sys.modules['rclpy'] = None          # any 'import rclpy' now raises ImportError
        import bayes_infer_ros
        from bayes_infer_ros import model, inference
        from bayes_infer_ros.inference import build_inference, VARIANTS
        import numpy as np
        e = build_inference('fpi', [np.eye(2, dtype=np.float32)], [[0]])
        print(e([np.array([1.0, 0.0], np.float32)], [np.array([0.5, 0.5], np.float32)])[0])
        bad = [m for m, mod in sys.modules.items() if mod is not None and m.startswith(('rclpy', 'rosidl', 'rcl_'))]
        assert not bad, bad
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
