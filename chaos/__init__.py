"""The fault suite: many instances, killed processes, cut connections, restarted brokers, skewed clocks.

Each backend's brokers live in its own folder, ``packages/<backend>/chaos/``;
they are modules of this package (``chaos.redis``), found on its path.
"""

from pathlib import Path

__path__ += [str(folder) for folder in sorted(Path(__file__).resolve().parents[1].glob("packages/*/chaos"))]
